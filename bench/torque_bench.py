"""Torque-mode simulated controllers on the OpenArm pair at 500 Hz. Prints JSON; not a test.

Synchronous stepping of the simulator (no pacing, no DDS): the physics and the controllers only.

- hold at the ready pose, 2 s: max |q - q0|;
- a 0.1 rad / 0.5 Hz sine on every joint of the left arm, 4 s: max |q - reference| after the
  first second, per joint, for the servos disabled (default), nulled fully each cycle, and
  nulled partially (ctrl = q: the servo's stiffness gone, its -kv qd damping left);
- the wrong bridge: holding with tau = M qdd - c (a constraint solver's torque) instead of
  M qdd + c: drift of the left J1 over 2 s;
- a 100 N m command on the left J1 motor: the torque the joint receives (jointactuatorfrc
  sensor) against its force range;
- an unmodelled 0.5 kg on each hand: hold error (the feed-forward does not read the scene);
- a task-space hold of the left TCP for 2,500 steps through constrained dynamics (Gauss's
  principle), bridged to torques by RNEA against the constraint torque alone;
- the crossing plan in torque mode against the position servos: start skew (motion onsets of
  the two arms' controllers) and max tracking error.

Usage: python bench/torque_bench.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

import numpy as np

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.resources import config_file, share_dir
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import ArmSimSettings, sim_config

BASE = sim_config(load_config(config_file("sim_openarm.yaml")))
PERIOD = 1.0 / BASE.sim.control_rate_hz


def simulator(kind: str = "torque", nulling: str = "disable", payload_kg: float = 0.0) -> SharedModel:
    arms = {a: ArmSimSettings(controller=kind, nulling=nulling) for a in ("left", "right")}
    shared = SharedModel.from_config(dataclasses.replace(
        BASE, sim=dataclasses.replace(BASE.sim, arms=arms)))
    if payload_kg:
        m = shared.model
        for b in range(m.nbody):
            if m.body(b).name.endswith("ee_base_link"):
                m.body_mass[b] += payload_kg  # the simulation's hand only: not the arm's own model
    return shared


def submit(shared: SharedModel, arm: str, times, p, v, a=None, stamp: float = 0.0):
    joints = shared.scene.arms[arm].joint_names
    req = GoalRequest(joints, list(times), np.asarray(p).tolist(), np.asarray(v).tolist(),
                      np.asarray(a).tolist() if a is not None else [[] for _ in times], stamp)
    reason, goal = check_goal(req, joints, shared.controller_time(), shared.settings.tolerances)
    assert reason is None, reason
    return shared.controllers[arm].submit(goal)


def hold_error(shared: SharedModel, seconds: float = 2.0) -> float:
    q0 = shared.snapshot().arms["left"].positions
    worst = 0.0
    for _ in range(int(seconds / PERIOD)):
        shared.step_cycle()
        worst = max(worst, float(np.abs(shared.data.qpos[shared.scene.arms["left"].qpos_adr] - q0).max()))
    return worst


def sine_error(shared: SharedModel, amplitude=0.1, hz=0.5, seconds=6.0) -> np.ndarray:
    """Max |q - reference| per joint over two whole periods of the sine (from 1 s to 5 s, after
    the start transient and before the trajectory's last segment, where the reference stops),
    rad (J,)."""
    q0 = shared.snapshot().arms["left"].positions
    t = np.arange(0.0, seconds + 1e-9, 0.01)
    w = 2 * np.pi * hz
    p = q0 + amplitude * np.sin(w * t)[:, None]
    v = amplitude * w * np.cos(w * t)[:, None] * np.ones(q0.size)
    a = -amplitude * w * w * np.sin(w * t)[:, None] * np.ones(q0.size)
    v[-1] = 0.0
    ticket = submit(shared, "left", t, p, v, a)
    worst = np.zeros(q0.size)
    for k in range(int((seconds + 0.2) / PERIOD)):
        shared.step_cycle()
        if 1.0 <= k * PERIOD <= seconds - 1.0 and ticket.desired is not None:
            worst = np.maximum(worst, np.abs(ticket.actual - ticket.desired))
    return worst


def payload_prediction(shared: SharedModel, payload_kg: float = 0.5) -> float:
    """The hold error an unmodelled ``payload_kg`` on the left hand must cause if the feed-forward
    is the arm's own model alone, rad (max over joints): at rest the motors supply
    RNEA_own + M_own Kp e, the scene needs RNEA_own + J_com' m g more, so e = M_own^-1 J' m g / Kp
    (M_own with armature; Kp per joint). A feed-forward that read the scene would leave e = 0."""
    import mujoco

    m, d = shared.model, shared.data
    arm = shared.scene.arms["left"]
    ctrl = shared.controllers["left"]
    mujoco.mj_forward(m, d)
    hand = next(b for b in range(m.nbody) if m.body(b).name == "left_ee_base_link"
                or (m.body(b).name.endswith("ee_base_link") and "left" in m.body(b).name))
    jacp = np.zeros((3, m.nv))
    mujoco.mj_jacBodyCom(m, d, jacp, None, hand)
    extra = jacp[:, arm.dof_adr].T @ (payload_kg * -m.opt.gravity)  # N m (J,)
    own = ctrl.own
    own.data.qpos[own.qpos_adr] = d.qpos[arm.qpos_adr]
    mujoco.mj_forward(own.model, own.data)
    full = np.zeros((own.model.nv, own.model.nv))
    mujoco.mj_fullM(own.model, own.data, full)
    inertia = full[np.ix_(own.dof_adr, own.dof_adr)]
    return float(np.abs(np.linalg.solve(inertia, extra) / ctrl.kp).max())


def partial_nulling(shared: SharedModel) -> SharedModel:
    """The trap: ctrl = q (no kv/kp qd term): stiffness gone, the servo's damping left."""
    for c in shared.controllers.values():
        c._null_ratio[:] = 0.0
    return shared


def wrong_bridge_drift() -> float:
    """Holding with M qdd - c: the bias enters with the wrong sign (twice gravity missing)."""
    shared = simulator()
    for c in shared.controllers.values():
        own = c.own
        right = own.inverse_dynamics

        def wrong(q, qd, qdd, own=own, right=right):
            bias = right(q, qd, np.zeros_like(qdd))
            return right(q, qd, qdd) - 2 * bias  # = M qdd - c
        own.inverse_dynamics = wrong
    return hold_error(shared)


def clamp_check() -> dict:
    shared = simulator()
    m, d = shared.model, shared.data
    ctrl = shared.controllers["left"]
    motor = int(ctrl.motor_ids[0])
    joint = shared.scene.arms["left"].joint_names[0]
    sensor = m.sensor(f"{joint}_actfrc").adr[0]
    d.ctrl[motor] = 100.0
    import mujoco

    mujoco.mj_step(m, d)
    return {"commanded_Nm": 100.0, "applied_Nm": float(d.sensordata[sensor]),
            "force_range_Nm": m.actuator_forcerange[motor].tolist()}


def crossing(kind: str) -> dict:
    return crossing_run(simulator(kind))


def crossing_config(name: str) -> dict:
    """The crossing plan on the simulator of the shipped configuration ``name``."""
    return crossing_run(SharedModel.from_config(sim_config(load_config(config_file(name)))))


def crossing_run(shared: SharedModel, each_cycle=None) -> dict:
    """Both arms' crossing trajectories against one stamp, stepped synchronously (no pacing):
    outcomes, start skew (motion onsets), max tracking error, real-time factor (one core).
    ``each_cycle()``: called after every control cycle (a recorder; its time is counted)."""
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    stamp = shared.controller_time() + 0.1
    tickets = {}
    for arm, traj in plan.arms.items():
        tickets[arm] = submit(shared, arm, traj.times, traj.positions, traj.velocities, None, stamp)
    t0, cycles = time.perf_counter(), 0
    while not all(t.done.is_set() for t in tickets.values()):
        shared.step_cycle()
        if each_cycle is not None:
            each_cycle()
        cycles += 1
        if shared.controller_time() > stamp + plan.duration + 3:
            break
    wall = time.perf_counter() - t0
    onsets = [t.motion_onset for t in tickets.values()]
    return {"outcomes": {a: t.outcome for a, t in tickets.items()},
            "start_skew_s": max(onsets) - min(onsets),
            "max_tracking_error_rad": max(t.max_tracking_error for t in tickets.values()),
            "wall_s": round(wall, 2),
            "real_time_factor": round(cycles * shared.control_period / wall, 2)}


def task_hold(bridge: str, axes=None, steps: int = 2500) -> float:
    """Max TCP position error (m) of the left arm held in task space for ``steps`` physics
    steps (the right arm held by its torque controller)."""
    import mujoco

    from mj_manipulator_ros.sim.controllers.task_hold import AXES, TaskSpaceHold

    shared = simulator()
    m, d = shared.model, shared.data
    left, right = shared.controllers["left"], shared.controllers["right"]
    arm = shared.scene.arms["left"]
    hold = TaskSpaceHold(left.own, "left_ee_control_point", axes or AXES)
    hold.hold_here(d.qpos[arm.qpos_adr].copy())
    site = m.site("left_ee_control_point").id
    x0 = d.site_xpos[site].copy()
    rarm = shared.scene.arms["right"]
    worst = 0.0
    for _ in range(steps):
        q, qd = d.qpos[arm.qpos_adr].copy(), d.qvel[arm.dof_adr].copy()
        tau = np.clip(hold.torque(q, qd, bridge), left.force_low, left.force_high)
        d.ctrl[left.motor_ids] = tau
        d.ctrl[right.actuator_ids] = right.update(d.time, d.qpos[rarm.qpos_adr].copy(),
                                                  d.qvel[rarm.dof_adr].copy())
        mujoco.mj_step(m, d)
        worst = max(worst, float(np.linalg.norm(d.site_xpos[site] - x0)))
    return worst


def main() -> None:
    hold = hold_error(simulator())
    disable = sine_error(simulator())
    full = sine_error(simulator(nulling="full"))
    partial = sine_error(partial_nulling(simulator(nulling="full")))
    loaded = simulator(payload_kg=0.5)
    predicted = payload_prediction(loaded)
    payload = hold_error(loaded)
    torque_cross, position_cross = crossing("torque"), crossing("position")
    rnea, constraint = task_hold("rnea"), task_hold("constraint")
    free_z = task_hold("rnea", ("x", "y", "rx", "ry", "rz"))
    sig = lambda x: float(f"{float(x):.4g}")  # noqa: E731
    mrad = lambda x: sig(np.max(x) * 1e3)  # noqa: E731
    wrong = wrong_bridge_drift()
    clamp = clamp_check()
    ratio = lambda a, b: sig(a / b) if b > 0 else float("inf")  # noqa: E731
    out = {
        "benchmark": "torque_mode", "cpus": os.cpu_count(), "control_rate_hz": 1 / PERIOD,
        "hold_at_ready_mrad": mrad(hold),
        "sine_tracking_mrad": {"servos_disabled": mrad(disable), "full_nulling": mrad(full),
                               "partial_nulling": mrad(partial),
                               "per_joint_servos_disabled": [mrad(e) for e in disable]},
        "partial_over_full": ratio(np.max(partial), np.max(full)),
        "wrong_bridge_drift_mrad": mrad(wrong),
        "clamp": clamp,
        "unmodelled_payload_hold_mrad": mrad(payload),
        "unmodelled_payload_predicted_mrad": mrad(predicted),
        "payload_over_prediction": ratio(payload, predicted),
        "task_space_hold_2500_steps_mm": {"rnea_bridge": sig(rnea * 1e3),
                                          "constraint_torque_only": sig(constraint * 1e3),
                                          "ratio": ratio(constraint, rnea),
                                          "rnea_bridge_linear_z_free": sig(free_z * 1e3)},
        "crossing": {"torque": torque_cross, "position": position_cross,
                     "tracking_torque_over_position": ratio(
                         torque_cross["max_tracking_error_rad"],
                         position_cross["max_tracking_error_rad"])},
    }
    # the issue's targets; the payload's is the physics' prediction (the issue expected >= 20 mrad,
    # which a 5 Hz bandwidth does not give a 0.5 kg hand: see payload_prediction)
    out["met"] = {
        "hold <= 0.1 mrad": hold <= 1e-4,
        "sine <= 2 mrad": float(np.max(disable)) <= 2e-3,
        "partial >= 10x full nulling": np.max(partial) >= 10 * np.max(full),
        "wrong bridge >= 30 mrad": wrong >= 0.03,
        "clamped to the force range": abs(clamp["applied_Nm"] - clamp["force_range_Nm"][1]) < 1e-6,
        "payload within 20% of the prediction": 0.8 <= payload / predicted <= 1.2,
        "task hold: RNEA bridge >= 4x better": constraint >= 4 * rnea,
        "crossing start skew <= one period": torque_cross["start_skew_s"] <= PERIOD,
        "crossing tracking <= 2x position": torque_cross["max_tracking_error_rad"]
        <= 2 * position_cross["max_tracking_error_rad"],
    }
    out["met"] = {k: bool(v) for k, v in out["met"].items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    sys.exit(main())
