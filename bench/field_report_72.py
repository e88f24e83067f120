"""enactic/openarm_ros2#72 reproduced on the actuator twin: the OpenArm driver's default MIT gains
(KP 20, KD 2.75) without gravity feed-forward, joint 1 commanded to 30-90 degrees while raising
the arm. The field report: 18.2 / 26.94 / 36.42 / 47.26 / 55.91 degrees reached (about 62 %).

For each angle, a fresh simulation of ``config/sim_openarm_driver_defaults.yaml`` (the arms
hanging, every joint 0), physics stepped synchronously (ROS-free, exact time): left joint 1 is
commanded from 0 to -angle (raising the arm forward; the joint's range ends at +80 degrees) in
3 s, rest to rest, the other joints held at 0, and the reference held 4 s more (goal time
unchecked: the goal waits, as the driver's would). Measured: joint 1 at the end, and the
largest sag of the other joints. Then the same with ``mit_feed_forward: true`` (tau_ff from the
arm's own model: gravity included), the static prediction kp (q_c - q) = tau_g(q) from the
model (the equilibrium a pure P controller against the model's gravity reaches), and the load
the field's figure implies: kp times its error over the model's gravity torque at the angle it
reached (1: the model's arm; above 1: the field's arm is heavier or its joint stiffer in
friction than the model).

Usage: python bench/field_report_72.py    Prints JSON; not a test.
"""

from __future__ import annotations

import dataclasses
import json
import time

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.interpolation import rest_to_rest
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import sim_config

ANGLES_DEG = (30.0, 45.0, 60.0, 75.0, 90.0)
FIELD_DEG = (18.2, 26.94, 36.42, 47.26, 55.91)
MOVE_S, HOLD_S = 3.0, 4.0


def run(cfg, angle_deg: float) -> tuple[float, float]:
    """(reached joint 1 angle, deg, magnitude; largest |other joint| of the arm, rad)."""
    shared = SharedModel.from_config(cfg)
    names = shared.controllers["left"].joint_names
    q0 = shared.snapshot().arms["left"].positions
    q1 = q0.copy()
    q1[0] = -np.radians(angle_deg)
    t = np.linspace(0.0, MOVE_S, 61)
    p, v = rest_to_rest(q0, q1, t)
    req = GoalRequest(names, t.tolist(), p.tolist(), v.tolist(), [[] for _ in t],
                      float(shared.data.time) + 0.01, goal_time_tolerance=-1.0)
    reason, goal = check_goal(req, names, float(shared.data.time), cfg.sim.tolerances)
    if reason is not None:
        raise SystemExit(f"goal rejected: {reason}")
    shared.controllers["left"].submit(goal)
    for _ in range(int((MOVE_S + HOLD_S) / shared.control_period)):
        shared.step_cycle()
    q = shared.snapshot().arms["left"].positions
    return float(np.degrees(-q[0])), float(np.max(np.abs(q[1:])))


def static_prediction(cfg, angle_deg: float, kp: float) -> float:
    """The joint 1 angle (deg) where kp (q_c - q) balances the model's gravity torque, the
    other joints at 0 (bisection on the model)."""
    scene = cfg.build_scene()
    m, d = scene.model, mujoco.MjData(scene.model)
    adr = scene.arms["left"].qpos_adr[0]
    dof = scene.arms["left"].dof_adr[0]
    qc = -np.radians(angle_deg)

    def balance(q: float) -> float:
        d.qpos[:] = scene.initial_qpos
        d.qpos[adr] = q
        mujoco.mj_forward(m, d)
        return kp * (qc - q) - d.qfrc_bias[dof]

    lo, hi = qc, 0.0          # balance(qc) = -tau_g(qc) > 0 when raising: the sign changes
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if np.sign(balance(mid)) == np.sign(balance(lo)):
            lo = mid
        else:
            hi = mid
    return float(np.degrees(-0.5 * (lo + hi)))


def implied_load_ratio(cfg, angle_deg: float, field_deg: float, kp: float) -> float:
    """The gravity torque the field's figure implies at the angle it reached (kp times its
    error, if a P controller balanced gravity there) over the model's gravity torque there."""
    scene = cfg.build_scene()
    m, d = scene.model, mujoco.MjData(scene.model)
    d.qpos[:] = scene.initial_qpos
    d.qpos[scene.arms["left"].qpos_adr[0]] = -np.radians(field_deg)
    mujoco.mj_forward(m, d)
    model_tau = abs(d.qfrc_bias[scene.arms["left"].dof_adr[0]])
    return float(kp * np.radians(angle_deg - field_deg) / model_tau)


def main() -> int:
    base = sim_config(load_config(config_file("sim_openarm_driver_defaults.yaml")))
    kp = base.sim.arm("left").mit_kp
    with_ff = dataclasses.replace(base, sim=dataclasses.replace(base.sim, arms={
        a: dataclasses.replace(s, mit_feed_forward=True) for a, s in base.sim.arms.items()}))
    started = time.perf_counter()
    rows = []
    for angle, field in zip(ANGLES_DEG, FIELD_DEG):
        reached, sag = run(base, angle)
        reached_ff, sag_ff = run(with_ff, angle)
        rows.append({"commanded_deg": angle, "field_deg": field,
                     "field_pct": round(100 * field / angle, 1),
                     "model_deg": round(reached, 2), "model_pct": round(100 * reached / angle, 1),
                     "difference_pp": round(100 * (reached - field) / angle, 1),
                     "static_prediction_deg": round(static_prediction(base, angle, kp), 2),
                     "field_implied_load_over_model": round(
                         implied_load_ratio(base, angle, field, kp), 3),
                     "other_joints_max_sag_rad": round(sag, 3),
                     "with_gravity_feed_forward_deg": round(reached_ff, 2),
                     "with_gravity_feed_forward_pct": round(100 * reached_ff / angle, 1),
                     "other_joints_max_sag_rad_with_ff": round(sag_ff, 3)})
    print(json.dumps({"conditions": "synchronous physics (ROS-free), actuator twin (cosim), "
                                    f"KP {kp}, KD {base.sim.arm('left').mit_kd}, left joint 1, "
                                    f"{MOVE_S} s move + {HOLD_S} s hold from hanging",
                      "wall_s": round(time.perf_counter() - started, 1), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
