"""Stop tables in the manner of ISO 10218-1 Annex B: per arm and joint, the controlled stop's
time, the joint's travel and the hand's travel, the joint moving alone at 33, 66 and 100 % of
its velocity limit through the plan's extended and folded poses of the arm.

Each row is one stop: the arm stands at the pose but for one joint, which accelerates from rest
(at ``RUN_UP`` of its acceleration limit), runs at the row's speed through the pose's value of
the joint (``LEAD_IN_S`` of steady speed before it, so a servo's lag has settled) and on, past
where the stop ends; the stop is asked as the joint passes the pose. The row's plan (:func:`row_plan`) is a single-arm plan the
executor would run; the prediction is the stop envelope's (``check/stop_envelope.predict``: the
executor's own ramp after one start lead, with the configuration's allowances for the arm's
response). Where the joint's range cannot hold the run-up, the stop and the run-out around the
pose's value, the run is moved within the range (``at`` says where the stop was asked); where
no run fits at that speed the row says so (``fits`` False) and has no figures.

Poses: of the plan's states every ``POSE_EVERY_S``, the one where the arm's hand (the body of
its last joint) is farthest from the body of its first joint (extended) and nearest (folded).

Measured figures come from elsewhere (the simulator per controller kind, with and without a
payload: ``sim/stop_trial.py`` via ``mj-manipulator-ros stop-table``; a robot: HIL stage 3) and
are put beside the predicted ones (:meth:`StopTable.with_measured`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

import mujoco
import numpy as np

from mj_manipulator_ros.check.stop_envelope import HandPaths, predict
from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan

#: the speeds of the rows, fractions of each joint's velocity limit (Annex B's)
SPEEDS = (0.33, 0.66, 1.0)
#: a row's speed is this much of its fraction of the limit: at the limit itself the plan's
#: spline peaks a rounding error above it and the validation refuses it
UNDER_LIMIT = 0.999
#: steady speed before the stop is asked, s (a servo's lag settles)
LEAD_IN_S = 0.2
#: after the request the plan runs on for one start lead and this many times the distance of
#: the executor's shortest ramp to rest (1.5 v / a long: 0.75 v^2 / a) before its own run-out
RUN_OUT = 1.3
#: the plan's states searched for the poses, s of plan time apart
POSE_EVERY_S = 0.05
#: the run-up's (and run-out's) acceleration, a fraction of the joint's acceleration limit
#: (``execution.stop_acceleration`` where it has none)
RUN_UP = 0.9
#: a row's run keeps this far inside the joint's range (rad or m)
EDGE = 0.01
#: samples of the row's plan, s apart
SPACING_S = 0.01


@dataclass(frozen=True)
class StopRow:
    """One stop of the table. Times in s, joint travel in rad (or m), hand travel in m.

    Attributes:
        arm, joint, pose ("extended" or "folded"), speed: fraction of the velocity limit.
        velocity: the joint's speed at the request (per s; ``UNDER_LIMIT`` of the row's).
        at: the joint's value where the stop is asked (the pose's, or moved within the range).
        fits: the row was run (False: no figures; ``why`` says why: the joint's range holds
            no run at this speed, or the run collides).
        stop: "controlled", or "hold" where no controlled stop exists within the joints'
            bounds (at the velocity limit itself the ramp's search finds none: the executor
            cancels, and the arm holds).
        time, joint_travel, hand_travel: predicted.
        measured: name (e.g. "position", "position+0.5kg", "robot") -> (time, joint travel,
            hand travel).
    """

    arm: str
    joint: str
    pose: str
    speed: float
    velocity: float
    at: float
    fits: bool
    stop: str = "controlled"
    time: float = float("nan")
    joint_travel: float = float("nan")
    hand_travel: float = float("nan")
    request: float = float("nan")   # plan time of the request in the row's plan, s
    measured: Mapping[str, tuple] = field(default_factory=dict)
    why: str = ""

    def to_dict(self) -> dict:
        def num(x):
            return None if x is None or (isinstance(x, float) and np.isnan(x)) else \
                round(float(x), 5)
        return {"arm": self.arm, "joint": self.joint, "pose": self.pose,
                "speed_pct": int(round(self.speed * 100)), "velocity": num(self.velocity),
                "at": num(self.at), "fits": self.fits, "why": self.why, "stop": self.stop,
                "predicted": {"time_s": num(self.time), "joint_travel": num(self.joint_travel),
                              "hand_travel_m": num(self.hand_travel)},
                "measured": {k: {"time_s": num(t), "joint_travel": num(j),
                                 "hand_travel_m": num(h)}
                             for k, (t, j, h) in self.measured.items()}}


@dataclass(frozen=True)
class StopTable:
    """Every row, with the poses they were taken at and the conditions."""

    rows: tuple[StopRow, ...]
    poses: Mapping[str, Mapping[str, np.ndarray]]   # arm -> pose name -> (J,)
    lead_s: float
    allowances: Mapping[str, float]

    def with_measured(self, name: str, figures: Mapping[int, tuple]) -> "StopTable":
        """The table with measured figures ``name`` for rows by index: (time s, joint travel,
        hand travel m)."""
        rows = tuple(dataclasses.replace(r, measured={**r.measured, name: figures[i]})
                     if i in figures else r for i, r in enumerate(self.rows))
        return dataclasses.replace(self, rows=rows)

    def to_dict(self) -> dict:
        return {"lead_s": self.lead_s, "allowances": dict(self.allowances),
                "poses": {a: {n: [round(float(x), 5) for x in q] for n, q in p.items()}
                          for a, p in self.poses.items()},
                "rows": [r.to_dict() for r in self.rows]}

    def summary(self) -> str:
        names = sorted({k for r in self.rows for k in r.measured})
        head = ["arm", "joint", "pose", "speed", "stop", "time s", "joint", "hand mm"] + \
            [f"{n}: time s / hand mm" for n in names]
        lines = [" | ".join(head)]
        for r in self.rows:
            if not r.fits:
                lines.append(f"{r.arm} | {r.joint} | {r.pose} | {r.speed:.0%} | {r.why}")
                continue
            cells = [r.arm, r.joint, r.pose, f"{r.speed:.0%}", r.stop, f"{r.time:.3f}",
                     f"{r.joint_travel:.3f}", f"{r.hand_travel * 1e3:.1f}"]
            for n in names:
                m = r.measured.get(n)
                cells.append("" if m is None else f"{m[0]:.3f} / {m[2] * 1e3:.1f}")
            lines.append(" | ".join(cells))
        return "\n".join(lines)


def arm_poses(plan: MultiArmPlan, scene, arm: str) -> dict[str, tuple[float, np.ndarray]]:
    """The plan's extended and folded poses of ``arm`` (module docstring): (plan time, (J,)
    in the plan's joint order) each."""
    traj = plan[arm]
    grid = np.arange(0.0, plan.duration + POSE_EVERY_S / 2, POSE_EVERY_S)
    q, _, _ = sample(traj, grid)
    model = scene.model
    data = mujoco.MjData(model)
    data.qpos[:] = scene.initial_qpos
    binding = scene.arms[arm]
    order = [list(binding.joint_names).index(j) for j in traj.joint_names]
    adr = np.asarray(binding.qpos_adr)[order]
    hand = int(model.jnt_bodyid[binding.joint_ids[order[-1]]])
    base = int(model.jnt_bodyid[binding.joint_ids[order[0]]])
    reach = np.empty(grid.size)
    for i, row in enumerate(q):
        data.qpos[adr] = row
        mujoco.mj_kinematics(model, data)
        reach[i] = np.linalg.norm(data.xpos[hand] - data.xpos[base])
    far, near = int(np.argmax(reach)), int(np.argmin(reach))
    return {"extended": (float(grid[far]), q[far]), "folded": (float(grid[near]), q[near])}


def row_plan(config: ExecutorConfig, arm: str, joint_names, pose: np.ndarray, joint: int,
             speed: float) -> Optional[tuple[MultiArmPlan, float, float]]:
    """The single-arm plan of one row: (plan, the request's plan time, the joint's value
    there); None where the joint's range cannot hold the run (module docstring)."""
    name = joint_names[joint]
    lim = config.arm(arm).joint_limits.get(name)
    if lim is None or lim.velocity is None:
        return None
    v = speed * lim.velocity * UNDER_LIMIT
    a_stop = lim.acceleration or config.execution.stop_acceleration
    a = RUN_UP * a_stop
    ramp = v * v / (2 * a)
    before = ramp + v * LEAD_IN_S                      # run-up to the request
    after = v * config.execution.start_lead_s + RUN_OUT * 0.75 * v * v / a_stop + ramp
    lo = -np.inf if lim.lower is None else lim.lower + EDGE
    hi = np.inf if lim.upper is None else lim.upper - EDGE
    at = float(pose[joint])
    # the direction with room for the stop after the pose's value; then moved within range
    up = (hi - at) >= (at - lo)
    sign = 1.0 if up else -1.0
    if hi - lo < before + after:
        return None
    start = at - sign * before
    end = at + sign * after
    shift = 0.0
    for edge in (start, end):
        if edge < lo:
            shift = max(shift, lo - edge)
        if edge > hi:
            shift = min(shift, hi - edge)
    at += shift
    start, end = at - sign * before, at + sign * after
    t_up = v / a
    t_cruise = (before - ramp) / v + (after - ramp) / v
    total = 2 * t_up + t_cruise
    times = np.arange(0.0, total + SPACING_S / 2, SPACING_S)
    times[-1] = total
    s, sd, sdd = _trapezoid(times, v, a, t_up, t_cruise)
    J = len(joint_names)
    pos = np.repeat(np.asarray(pose, dtype=float)[None, :], times.size, axis=0)
    vel = np.zeros((times.size, J))
    acc = np.zeros((times.size, J))
    pos[:, joint] = start + sign * s
    vel[:, joint] = sign * sd
    acc[:, joint] = sign * sdd
    traj = ArmTrajectory(tuple(joint_names), times, pos, vel, acc, arm=arm)
    request = t_up + (before - ramp) / v
    return MultiArmPlan({arm: traj}), float(request), float(at)


def _trapezoid(t: np.ndarray, v: float, a: float, t_up: float, t_cruise: float):
    """Distance, speed and acceleration of a trapezoidal speed profile at times ``t``."""
    t2 = t_up + t_cruise
    s = np.where(t < t_up, 0.5 * a * t**2,
                 np.where(t < t2, 0.5 * a * t_up**2 + v * (t - t_up),
                          0.5 * a * t_up**2 + v * t_cruise + v * (t - t2)
                          - 0.5 * a * (t - t2) ** 2))
    sd = np.where(t < t_up, a * t, np.where(t < t2, v, v - a * (t - t2)))
    sdd = np.where(t < t_up, a, np.where(t < t2, 0.0, -a))
    return s, np.maximum(sd, 0.0), sdd


def stop_table(plan: MultiArmPlan, config: ExecutorConfig, scene,
               arms: Optional[list[str]] = None, gate=None) -> tuple[StopTable, dict]:
    """The predicted table for ``plan``'s arms (or ``arms``), and per row index what a
    measurement runs: (the row's plan, its request's plan time, the other arms' poses (J,) in
    their configured joint order: the plan's at the pose's plan time).

    Args:
        gate: ``gate(row plan, other arms' poses)`` raises where a row's run collides (the
            pre-flight gate: ``PreflightCheck``); such a row is not run (``why``).
    """
    rows, runs, poses = [], {}, {}
    s = config.execution
    for arm in arms or list(plan.arm_names):
        names = plan[arm].joint_names
        found = arm_poses(plan, scene, arm)
        poses[arm] = {n: q for n, (_t, q) in found.items()}
        for pose_name, (when, pose) in found.items():
            others = {}
            for other in plan.arm_names:
                if other != arm:
                    q, _, _ = sample(plan[other], [when])
                    order = [list(plan[other].joint_names).index(j)
                             for j in config.arm(other).joint_names]
                    others[other] = q[0][order]
            for j, joint in enumerate(names):
                for speed in SPEEDS:
                    lim = config.arm(arm).joint_limits.get(joint)
                    velocity = speed * lim.velocity * UNDER_LIMIT if lim and lim.velocity \
                        else float("nan")
                    made = row_plan(config, arm, names, pose, j, speed)
                    if made is None:
                        rows.append(StopRow(arm, joint, pose_name, speed, velocity,
                                            float(pose[j]), False,
                                            why="the joint's range holds no run at this speed"))
                        continue
                    row_plan_, request, at = made
                    if gate is not None:
                        try:
                            gate(row_plan_, others)
                        except Exception as exc:  # noqa: BLE001 - the gate's refusal, said
                            first = str(exc).splitlines()
                            rows.append(StopRow(arm, joint, pose_name, speed, velocity, at,
                                                False, why="the run collides: " + " ".join(
                                                    first[1:2] or first[:1])))
                            continue
                    env = predict(row_plan_, config, HandPaths(row_plan_, scene),
                                  requests=[request])
                    frm = max(request - s.tracking_lag_s, 0.0)
                    runs[len(rows)] = (row_plan_, request, others)
                    if np.isnan(env.controlled_time[0]):   # the executor cancels: a hold
                        run_on = request + s.hold_overshoot_s
                        q, _, _ = sample(row_plan_[arm], [frm, request, run_on])
                        travel = abs(q[2, j] - q[0, j]) + abs(q[2, j] - q[1, j])
                        rows.append(StopRow(arm, joint, pose_name, speed, velocity, at, True,
                                            "hold", env.hold_time, float(travel),
                                            float(env.hold_travel[arm][0]), request))
                        continue
                    q, _, _ = sample(row_plan_[arm], [frm, float(env.rest[0])])
                    rows.append(StopRow(arm, joint, pose_name, speed, velocity, at, True,
                                        "controlled", float(env.controlled_time[0]),
                                        float(abs(q[1, j] - q[0, j])),
                                        float(env.controlled_travel[arm][0]), request))
    allowances = {k: getattr(s, k) for k in ("stop_settle_s", "hold_settle_s",
                                             "tracking_lag_s", "stop_overtravel_m")}
    return StopTable(tuple(rows), poses, s.start_lead_s, allowances), runs


def plot_table(table: StopTable, path: Path) -> Path:
    """A PNG: per arm, each joint's predicted stop time and hand travel against its speed (%),
    extended (solid) and folded (dashed), measured figures as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = sorted({r.arm for r in table.rows})
    fig, axes = plt.subplots(2, len(arms), figsize=(6 * len(arms), 7), dpi=100, squeeze=False)
    names = sorted({k for r in table.rows for k in r.measured})
    markers = dict(zip(names, "osv^Dx*+"))
    for c, arm in enumerate(arms):
        ax_t, ax_d = axes[0][c], axes[1][c]
        joints = list(dict.fromkeys(r.joint for r in table.rows if r.arm == arm))
        colors = plt.cm.tab10(np.linspace(0, 1, max(len(joints), 1), endpoint=False))
        for joint, color in zip(joints, colors):
            for pose, style in (("extended", "-"), ("folded", "--")):
                rs = [r for r in table.rows if r.arm == arm and r.joint == joint
                      and r.pose == pose and r.fits]
                if not rs:
                    continue
                x = [100 * r.speed for r in rs]
                label = joint if pose == "extended" else None
                ax_t.plot(x, [r.time for r in rs], style, color=color, lw=1.2, label=label)
                ax_d.plot(x, [1e3 * r.hand_travel for r in rs], style, color=color, lw=1.2)
                for n in names:
                    ms = [(100 * r.speed, r.measured[n]) for r in rs if n in r.measured]
                    ax_t.plot([m[0] for m in ms], [m[1][0] for m in ms], markers[n],
                              color=color, ms=4, mfc="none")
                    ax_d.plot([m[0] for m in ms], [1e3 * m[1][2] for m in ms], markers[n],
                              color=color, ms=4, mfc="none")
        ax_t.set_title(f"{arm}: controlled stop, one joint at a time (lead {table.lead_s:g} s)")
        ax_t.set_ylabel("stop time (s)")
        ax_d.set_ylabel("hand travel (mm)")
        ax_d.set_xlabel("speed (% of the joint's velocity limit)")
        ax_t.legend(fontsize=7, ncol=2)
        for ax in (ax_t, ax_d):
            ax.grid(alpha=0.3)
    if names:
        axes[1][0].text(0.01, 0.98, "lines: predicted (solid extended, dashed folded); "
                        + ", ".join(f"{markers[n]} {n}" for n in names) + ": measured",
                        transform=axes[1][0].transAxes, va="top", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
