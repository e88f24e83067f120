"""How far each arm goes if a controlled stop is asked for at any plan time.

For a request at plan time s, the arms keep the plan at speed f for one start lead, then ramp to
rest along it (``core/time_scaling.py``: the ramp the executor sends, computed the same way), so
the rest comes at a plan time r(s) common to every arm. From s to r(s), per arm: the stop time
(lead + ramp), the largest joint path length (rad or m) and the path length of the hand (the body
of the arm's last joint, m), computed from the plan itself: exact up to the sampling of the
path (``SPACING_S`` of plan time), not measured.

Shapes: K request times.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.joint_path import cumulative_joint_paths
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.time_scaling import config_bounds, stop_after_lead
from mj_manipulator_ros.model.chain_kinematics import ChainKinematics, chain_qpos_adr

#: plan-time spacing of the path samples the travel is summed over, s
SPACING_S = 0.002


@dataclass(frozen=True)
class StopProfile:
    """Controlled-stop figures for requests every ``every`` s of plan time.

    Attributes:
        request (K,): plan times of the requests, s.
        rest (K,): plan time where every arm stands, s.
        stop_time (K,): request to rest, s.
        joint_travel: per arm (K,): the largest joint path length, rad or m.
        hand_travel: per arm (K,): the hand's path length, m.
        hand: per arm, the body counted as its hand.
        lead_s, speed: the start lead and the plan speed assumed.
    """

    request: np.ndarray
    rest: np.ndarray
    stop_time: np.ndarray
    joint_travel: Mapping[str, np.ndarray]
    hand_travel: Mapping[str, np.ndarray]
    hand: Mapping[str, str]
    lead_s: float
    speed: float

    def worst(self) -> dict:
        """Per figure, its largest value and the request's plan time."""
        k = int(np.argmax(self.stop_time))
        out = {"stop_time_s": (float(self.stop_time[k]), float(self.request[k]))}
        for arm in self.joint_travel:
            j = int(np.argmax(self.joint_travel[arm]))
            h = int(np.argmax(self.hand_travel[arm]))
            out[f"{arm}_joint_travel"] = (float(self.joint_travel[arm][j]), float(self.request[j]))
            out[f"{arm}_hand_travel_m"] = (float(self.hand_travel[arm][h]), float(self.request[h]))
        return out

    def summary(self) -> str:
        w = self.worst()
        lines = [f"controlled stop from any plan time (start lead {self.lead_s:g} s, speed "
                 f"{self.speed:g}; {self.request.size} request times):",
                 f"  longest stop: {w['stop_time_s'][0]:.3f} s (asked at plan time "
                 f"{w['stop_time_s'][1]:.2f} s)"]
        for arm in self.joint_travel:
            jt, jt_at = w[f"{arm}_joint_travel"]
            ht, ht_at = w[f"{arm}_hand_travel_m"]
            lines.append(f"  {arm}: largest joint travel {jt:.4f} (at {jt_at:.2f} s); hand "
                         f"({self.hand[arm]}) travel {ht * 1e3:.1f} mm (at {ht_at:.2f} s)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"lead_s": self.lead_s, "speed": self.speed, "hand": dict(self.hand),
                "worst": self.worst(), "request": self.request.tolist(),
                "rest": self.rest.tolist(), "stop_time": self.stop_time.tolist(),
                "joint_travel": {a: v.tolist() for a, v in self.joint_travel.items()},
                "hand_travel": {a: v.tolist() for a, v in self.hand_travel.items()}}


def stop_profile(plan: MultiArmPlan, config: ExecutorConfig, scene, every: float = 0.05,
                 speed: float = 1.0, requests=None) -> StopProfile:
    """The controlled stop from every ``every`` s of plan time (see the module docstring).

    Args:
        plan: the plan (validated).
        config: its arms' limits, ``start_lead_s`` and ``stop_acceleration``.
        scene: a :class:`~mj_manipulator_ros.model.scene.Scene` with the plan's arms bound.
        every: spacing of the request times, s.
        speed: the plan speed the stop starts from.
        requests: instead of every ``every`` s, these request plan times (s).
    """
    lead = config.execution.start_lead_s
    bounds = config_bounds(plan, config)
    grid = np.arange(0.0, plan.duration + SPACING_S / 2, SPACING_S)
    joints_cum, hand_cum, hand = cumulative_paths(plan, scene, grid)
    requests = np.arange(0.0, plan.duration, every) if requests is None else \
        np.asarray(requests, dtype=float)
    rest, stop_time = np.empty(requests.size), np.empty(requests.size)
    for k, s in enumerate(requests):
        s0, ramp = stop_after_lead(plan, bounds, s, lead, speed)
        rest[k] = ramp.end_plan_time
        stop_time[k] = (s0 - s) / speed + ramp.duration
    joint_travel = {a: path_between(c, grid, requests, rest).max(axis=1) for a, c in joints_cum.items()}
    hand_travel = {a: path_between(c[:, None], grid, requests, rest)[:, 0]
                   for a, c in hand_cum.items()}
    return StopProfile(requests, rest, stop_time, joint_travel, hand_travel, hand, lead, speed)


def cumulative_paths(plan: MultiArmPlan, scene, grid: np.ndarray):
    """Per arm: cumulative joint path lengths (M, J) and the hand's (M,) along ``grid`` (every
    other joint of the model at ``qpos0``; the hands placed for the whole grid at once,
    ``model/chain_kinematics.py``)."""
    model = scene.model
    positions = {a: sample(t, grid)[0] for a, t in plan.arms.items()}
    # every joint of the plan, in one row per sample (an arm's hand may hang below another
    # arm's joint: a torso)
    adr = np.concatenate([np.asarray(scene.arms[a].qpos_adr)[
        [list(scene.arms[a].joint_names).index(j) for j in t.joint_names]]
        for a, t in plan.arms.items()]).astype(int)
    every = np.hstack([positions[a] for a in plan.arms])
    hand_names, hand_cum = {}, {}
    for arm, traj in plan.arms.items():
        binding = scene.arms[arm]
        body = int(model.jnt_bodyid[binding.joint_ids[
            list(binding.joint_names).index(traj.joint_names[-1])]])
        hand_names[arm] = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body) or str(body)
        on = np.isin(adr, list(chain_qpos_adr(model, body)))
        xyz = ChainKinematics(model, body, adr[on]).positions(every[:, on])
        hand_cum[arm] = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(xyz, axis=0),
                                                                        axis=1))])
    joints_cum = {a: cumulative_joint_paths(q) for a, q in positions.items()}
    return joints_cum, hand_cum, hand_names


def path_between(cum: np.ndarray, grid: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cum(b) - cum(a), linear between grid points; cum (M, n), a, b (K,) -> (K, n)."""
    out = np.empty((a.size, cum.shape[1]))
    for j in range(cum.shape[1]):
        out[:, j] = np.interp(b, grid, cum[:, j]) - np.interp(a, grid, cum[:, j])
    return out


def plot_stops(profile: StopProfile, path: Path, hold=None) -> Path:
    """Stop time and travel against the plan time of the request (PNG); with ``hold`` (a
    :class:`~mj_manipulator_ros.sim.hold_overshoot.HoldOvershoot`), each arm's measured joint
    travel after a cancel too."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_d) = plt.subplots(2, 1, figsize=(9, 6), dpi=100, sharex=True)
    ax_t.plot(profile.request, profile.stop_time, lw=1.2)
    ax_t.set_ylabel("stop time (s)")
    ax_t.set_title(f"controlled stop asked at each plan time (lead {profile.lead_s:g} s)")
    for arm in profile.hand_travel:
        ax_d.plot(profile.request, profile.hand_travel[arm] * 1e3, lw=1.2,
                  label=f"{arm} hand ({profile.hand[arm]}), mm")
        ax_d.plot(profile.request, profile.joint_travel[arm] * 1e3, lw=1.0, ls="--",
                  label=f"{arm} largest joint, mrad")
    if hold is not None:
        for arm in hold.travel:
            ax_d.plot(hold.request, hold.travel[arm] * 1e3, "o", ms=4,
                      label=f"{arm} cancel (hold, {hold.kinds[arm]}): largest joint, mrad")
    ax_d.set_xlabel("plan time of the request (s)")
    ax_d.set_ylabel("travel until rest")
    ax_d.legend(fontsize=8)
    for ax in (ax_t, ax_d):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
