"""Generate config/plans/openarm_wave.yaml: both OpenArm arms swing outward and back, mirrored.

From the crossing plan's ready pose (the simulator's initial pose), each arm opens its shoulder
and elbow away from the other arm and returns, twice, on one 10 ms grid (4 rest-to-rest moves
of 1.5 s). Unlike the crossing plan it is collision-free with either arm running alone, so
bring-up stage 4 has a plan to run per arm; the script checks that (and the synchronized
replay) before writing. Usage: ``.venv/bin/python tools/make_wave_plan.py``. The OpenArm's only:
another robot's configuration is refused, naming ``mj-manipulator-ros make-plan`` (any robot).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.interpolation import rest_to_rest_chain
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan, save_plan
from mj_manipulator_ros.check.timeline import build_timeline
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.check.preflight import scene_checker

ROOT = Path(__file__).resolve().parents[1]
DT = 0.01
SEGMENT_S = 1.5
#: per arm: joint offsets (rad) of the "open" pose from ready; the right arm mirrors joints 1-3
OPEN = np.array([-0.25, -0.3, -0.2, -0.35, 0.0, 0.0, 0.0])
MIRROR = np.array([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(ROOT / "config/sim_openarm.yaml"))
    parser.add_argument("--out", default=str(ROOT / "config/plans/openarm_wave.yaml"))
    args = parser.parse_args()
    config = load_config(args.config)
    shape = {a.name: len(a.joint_names) for a in config.arms}
    if shape != {"left": OPEN.size, "right": OPEN.size}:
        raise SystemExit(f"tools/make_wave_plan.py makes the OpenArm pair's shipped wave (arms "
                         f"'left' and 'right', {OPEN.size} joints each); {args.config} has "
                         f"{shape}. For any robot: mj-manipulator-ros make-plan --config "
                         f"{args.config} --out PLAN.yaml")
    ready = {a: t.positions[0] for a, t in
             load_plan(ROOT / "config/plans/openarm_crossing.yaml").arms.items()}
    n = int(round(SEGMENT_S / DT)) + 1
    t_seg = np.linspace(0.0, SEGMENT_S, n)
    arms = {}
    for arm in ("left", "right"):
        q_open = ready[arm] + OPEN * (MIRROR if arm == "right" else 1.0)
        P, V = rest_to_rest_chain([ready[arm], q_open, ready[arm], q_open, ready[arm]], t_seg)
        times = np.round(np.arange(P.shape[0]) * DT, 6)
        arms[arm] = ArmTrajectory(config.arm(arm).joint_names, times, P.round(6), V.round(6))
    plan = MultiArmPlan(arms)
    validate_plan(plan, config)
    checker = scene_checker(config)
    reports = {"synchronized": checker.check(plan)}
    for arm in plan.arm_names:
        others = {a: ready[a] for a in plan.arm_names if a != arm}
        timeline = build_timeline(plan.subset([arm]), "synchronized").with_holds(others)
        reports[f"{arm} alone"] = checker.check(timeline=timeline, mode="recorded")
    for label, report in reports.items():
        print(f"{label}: {report.summary().splitlines()[0]}")
        if not report.collision_free:
            raise SystemExit(f"not written: the plan collides ({label})")
    save_plan(plan, args.out)
    print(f"wrote {args.out}: {plan['left'].times.size} states, {plan.duration:.2f} s")


if __name__ == "__main__":
    main()
