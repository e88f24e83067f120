"""Where a combined goal's time goes before its start stamp, phase by phase, in one process.
Prints JSON; not a test.

Per plan (the OpenArm pair: its wave resampled to N points; the tiny arms of the tests, 2 and
4 of them, a sinusoid of N points), each phase of the execution node's goal callback timed
alone, median of ``--repeats`` (each repeat a new plan to the gate, as MoveIt's are):

- ``deserialization``: the FollowJointTrajectory goal from its serialized form (rclpy's);
- ``conversion``: the combined trajectory split by arm, and its tolerances (``split_combined``,
  ``split_tolerances``);
- ``validation``: ``validate_plan`` (shapes, times, limits, the spline limits between
  waypoints);
- ``synchronized_replay``: the gate's continuous replay of every arm at once;
- ``band_width``: how far the arms can be apart when one fails (``failure_band``: the
  controlled stop from every 50 ms of the plan);
- ``band_replay``: the replay of every pair of arms up to that far apart;
- ``gate``: the gate as the node calls it (the three above, no verdict cached);
- ``lead``: the configured start lead (waited, not computed).

Not here (they need live controllers): the start-state and clock checks (from joint states
already received: 1-3 ms in ``bench/goal_latency.py``'s node account) and acceptance. The
gate's construction (the scene, the allowed-collision matrix, cached on disk) happens once
when the node starts: ``startup_s``.

Usage: python bench/goal_phases.py [--repeats 5] [--points 100,500,1000,2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import mj_manipulator_ros  # noqa: F401  (first: BLAS on one thread, as in the package's processes)
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))


def _resampled(plan, points: int):
    """``plan`` at ``points`` waypoints (positions and velocities sampled from its spline)."""
    from mj_manipulator_ros.core.interpolation import sample
    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan

    t = np.linspace(0.0, plan.duration, points)
    return MultiArmPlan({a: ArmTrajectory(tr.joint_names, t, *sample(tr, t)[:2])
                         for a, tr in plan.arms.items()})


def _sinusoid(config, points: int, duration: float = 4.0):
    """Every arm of ``config`` swinging its joints by 0.3 rad and back, rest to rest."""
    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan

    t = np.linspace(0.0, duration, points)
    s = np.sin(np.pi * t / duration) ** 2
    ds = np.pi / duration * np.sin(2 * np.pi * t / duration)
    arms = {}
    for k, arm in enumerate(config.arms):
        sign = 1.0 if k % 2 == 0 else -1.0
        q = np.outer(s, np.full(len(arm.joint_names), 0.3 * sign))
        v = np.outer(ds, np.full(len(arm.joint_names), 0.3 * sign))
        arms[arm.name] = ArmTrajectory(arm.joint_names, t, q, v)
    return MultiArmPlan(arms)


def _nudged(plan, k: int):
    """A new plan to the gate's cache, the same motion (interior waypoints moved k x 1e-9)."""
    import dataclasses

    from mj_manipulator_ros.core.plan import MultiArmPlan

    return MultiArmPlan({a: dataclasses.replace(t, positions=np.vstack(
        [t.positions[:1], t.positions[1:-1] + k * 1e-9, t.positions[-1:]]))
        for a, t in plan.arms.items()})


def phases(config, plan, repeats: int) -> dict:
    from control_msgs.action import FollowJointTrajectory
    from rclpy.serialization import deserialize_message, serialize_message

    from mj_manipulator_ros.apps.demo import combined_trajectory
    from mj_manipulator_ros.check.failure_band import failure_band
    from mj_manipulator_ros.check.preflight import PreflightCheck
    from mj_manipulator_ros.core.validation import validate_plan
    from mj_manipulator_ros.ros.conversion import split_combined, split_tolerances

    t0 = time.perf_counter()
    gate = PreflightCheck(config)
    startup = time.perf_counter() - t0
    checker = gate.checker
    rows: dict[str, list[float]] = {}

    def timed(name: str, fn):
        t = time.perf_counter()
        out = fn()
        rows.setdefault(name, []).append(time.perf_counter() - t)
        return out

    for k in range(repeats):
        sent = _nudged(plan, k + 1)
        data = serialize_message(FollowJointTrajectory.Goal(
            trajectory=combined_trajectory(sent)))
        goal = timed("deserialization", lambda: deserialize_message(
            data, FollowJointTrajectory.Goal))
        split = timed("conversion", lambda: (split_combined(goal.trajectory, config),
                                             split_tolerances(goal, config, sent.arm_names)))
        timed("validation", lambda: validate_plan(split[0], config))
        timed("synchronized_replay", lambda: checker.check(split[0], mode="synchronized",
                                                           continuous=True))
        band = timed("band_width", lambda: failure_band(split[0], config))
        timed("band_replay", lambda: checker.check(split[0], mode="band", skew=band.skew_s))
        timed("gate", lambda: gate(_nudged(split[0], 1000 + k)))
    out = {name: round(statistics.median(v), 4) for name, v in rows.items()}
    out["lead"] = config.execution.start_lead_s
    out["before_the_stamp"] = round(sum(out[p] for p in (
        "deserialization", "conversion", "validation", "gate")), 4)
    return {"startup_s": round(startup, 2), "band_s": round(band.skew_s, 3),
            "median_s": out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--points", default="100,500,1000,2000")
    args = parser.parse_args()
    from mj_manipulator_ros.core.config import config_from_mapping, load_config
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.model.limits import with_model_limits
    from mj_manipulator_ros.resources import config_file, share_dir
    from tiny_arm import tiny_mapping

    points = [int(p) for p in args.points.split(",")]
    out = {"benchmark": "goal_phases", "cores": len(os.sched_getaffinity(0)),
           "conditions": "one process, no ROS graph; the machine as it is (see busy loops)",
           "repeats": args.repeats, "robots": {}}
    openarm = load_config(config_file("openarm_bimanual.yaml"))
    wave = load_plan(share_dir() / "config/plans/openarm_wave.yaml")
    out["robots"]["openarm_pair"] = {str(n): phases(openarm, _resampled(wave, n), args.repeats)
                                     for n in points}
    with tempfile.TemporaryDirectory() as tmp:
        for arms in (2, 4):
            names = tuple("abcd"[:arms])
            config = with_model_limits(config_from_mapping(
                tiny_mapping(Path(tmp), arms=names, separation=0.8)))
            out["robots"][f"tiny_{arms}_arms"] = {
                str(n): phases(config, _sinusoid(config, n), args.repeats) for n in points}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
