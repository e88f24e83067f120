"""Generate config/plans/openarm_crossing.yaml: the OpenArm arms reach into each other's space.

Key hand positions (x forward, y left, z up; m), solved by position-only IK on the composed
scene, joined by quintic (rest-to-rest) blends in joint space, sampled on one shared 10 ms grid.
Ready: left hand high-centre, right hand low-centre. Then: the left lifts a little while the
right arm retreats (both start moving at once); the left reaches down and across into the right hand's ready spot and
comes back; the right returns; the left retreats; the right reaches up and across into the left
hand's ready spot and comes back; the left returns.

Run synchronized, the retreating arm is always out of the way. Run one arm after the other,
the reaching arm goes where the other arm's hand is still waiting. Usage:
``.venv/bin/python tools/make_crossing_plan.py [--out config/plans/openarm_crossing.yaml]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.interpolation import rest_to_rest
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import save_plan
from mj_manipulator_ros.model.scene import scene_for

ROOT = Path(__file__).resolve().parents[1]
DT = 0.01
SEGMENT_S = 1.75         # each of the eight moves (8 x 1.75 s = 14 s, 1401 states)
DWELL_S = 0.0            # at rest before the first and after the last move
HANDS = {  # key hand positions, m
    "left": {"ready": (0.25, 0.07, 0.66), "lift": (0.27, 0.08, 0.70), "reach": (0.22, -0.06, 0.46),
             "retreat": (0.2, 0.3, 0.62)},
    "right": {"ready": (0.25, -0.07, 0.44), "lift": (0.27, -0.08, 0.40), "reach": (0.22, 0.06, 0.64),
              "retreat": (0.2, -0.3, 0.42)},
}
STEPS = [  # (left key, right key) at the end of each move; both arms start moving together
    ("lift", "retreat"), ("reach", "retreat"), ("ready", "retreat"), ("ready", "ready"),
    ("retreat", "lift"), ("retreat", "reach"), ("retreat", "ready"), ("ready", "ready"),
]


def solve_ik(model, data, scene, arm: str, target, seeds, iters: int = 300):
    a = scene.arms[arm]
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"openarm_{arm}_ee_base_link")
    jac = np.zeros((3, model.nv))
    best = (None, np.inf)
    for seed in seeds:
        q = np.clip(np.array(seed, float), a.lower, a.upper)
        for _ in range(iters):
            data.qpos[:] = scene.initial_qpos
            data.qpos[a.qpos_adr] = q
            mujoco.mj_kinematics(model, data)
            mujoco.mj_comPos(model, data)
            err = np.asarray(target) - data.xpos[body]
            if np.linalg.norm(err) < 1e-4:
                break
            mujoco.mj_jacBody(model, data, jac, None, body)
            J = jac[:, a.dof_adr]
            dq = J.T @ np.linalg.solve(J @ J.T + 1e-3 * np.eye(3), err)
            dq -= 0.02 * (q - np.array(seed)) * np.array([0, 0, 0, 0, 1, 1, 1])  # keep wrists near seed
            q = np.clip(q + dq, a.lower + 1e-3, a.upper - 1e-3)
        e = float(np.linalg.norm(err))
        if e < 1e-3:  # seeds are in order of preference: the first good answer wins
            return q, e
        if e < best[1]:
            best = (q.copy(), e)
    return best




def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(ROOT / "config/sim_openarm.yaml"))
    parser.add_argument("--out", default=str(ROOT / "config/plans/openarm_crossing.yaml"))
    args = parser.parse_args()
    scene = scene_for(load_config(args.config))
    model, data = scene.model, mujoco.MjData(scene.model)
    rng = np.random.default_rng(0)
    key_q: dict[str, dict[str, np.ndarray]] = {"left": {}, "right": {}}
    for arm, sign in (("left", 1), ("right", -1)):
        a = scene.arms[arm]
        previous = np.array([-sign * 0.7, 0, sign * 0.6, 1.4, 0, 0, 0])
        for key in ("ready", "lift", "reach", "retreat"):
            seeds = [previous] + [rng.uniform(a.lower, a.upper) for _ in range(40)]
            q, err = solve_ik(model, data, scene, arm, HANDS[arm][key], seeds)
            if err > 5e-3:
                raise SystemExit(f"IK failed for {arm} {key} at {HANDS[arm][key]}: error {err:.3f} m")
            key_q[arm][key] = q
            previous = key_q[arm]["ready"]
    n_seg = int(round(SEGMENT_S / DT)) + 1
    n_dwell = int(round(DWELL_S / DT))
    arms = {}
    for side, arm in enumerate(("left", "right")):
        keys = ["ready"] + [step[side] for step in STEPS]
        pos, vel = [np.repeat(key_q[arm]["ready"][None], n_dwell, 0)], [np.zeros((n_dwell, 7))]
        for k in range(len(keys) - 1):
            p, v = rest_to_rest(key_q[arm][keys[k]], key_q[arm][keys[k + 1]],
                                np.linspace(0.0, SEGMENT_S, n_seg))
            pos.append(p[1:] if k else p)
            vel.append(v[1:] if k else v)
        pos.append(np.repeat(key_q[arm]["ready"][None], n_dwell, 0))
        vel.append(np.zeros((n_dwell, 7)))
        P, V = np.concatenate(pos), np.concatenate(vel)
        times = np.round(np.arange(P.shape[0]) * DT, 6)
        arms[arm] = ArmTrajectory(scene.arms[arm].joint_names, times, P.round(6), V.round(6))
    plan = MultiArmPlan(arms)
    save_plan(plan, args.out)
    ready = {j: float(x) for arm in ("left", "right")
             for j, x in zip(scene.arms[arm].joint_names, key_q[arm]["ready"].round(6))}
    print("scene.initial_positions (the plan's first pose):", ready)
    print(f"wrote {args.out}: {plan['left'].times.size} states, {plan.duration:.2f} s")


if __name__ == "__main__":
    main()
