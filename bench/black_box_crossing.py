"""The black box on the crossing plan: a failure at a random moment, each kind, no --record.
Prints JSON; not a test (the suite's test_black_box.py runs the tiny pair).

The simulated OpenArm pair in this process (position servos, sim time at ``--pace`` x real
time), the shipped crossing plan (14 s), the executor with the black box at its defaults
(10 s before the failure, every arm until at rest). Per run the arms are first moved to the
plan's start, then one failure at a seeded random plan time in [1, 13] s:

- ``abort``: the left arm's controller aborts its goal (simulator fault ``abort_after_s``);
- ``watch``: the left arm's controller stops following (``freeze``): the execution watch trips
  (progress skew or tracking error) and stops every arm;
- ``operator``: ``MultiArmExecutor.stop`` (an operator's stop: every arm along the plan).

Each run's file is read with rosbags' ``AnyReader`` (every message deserialized) and checked:
the report names it; its joint states reach back at least ``black_box_s`` before the failure
event (the executor has run longer than that); every arm at rest at its end (no joint moved
more than 1e-4 over its last 0.1 s of joint states) and after every arm's result. Reported per
run: the window before and after the failure (s), messages, size, the writer's rest note.

Usage: python bench/black_box_crossing.py [--runs 3] [--pace 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import mj_manipulator_ros  # noqa: E402,F401  (one BLAS thread, before numpy)
import numpy as np  # noqa: E402

from mj_manipulator_ros.check.preflight import preflight_for  # noqa: E402
from mj_manipulator_ros.core.approach import approach_plan  # noqa: E402
from mj_manipulator_ros.core.plan_io import load_plan  # noqa: E402
from mj_manipulator_ros.model.limits import load_config_with_model  # noqa: E402
from mj_manipulator_ros.resources import config_file, share_dir  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402
from mj_manipulator_ros.sim.sim_config import sim_config  # noqa: E402
from mj_manipulator_ros.sim.sim_node import SimNode  # noqa: E402
from plan_moment import at_plan_time  # noqa: E402

KINDS = ("abort", "watch", "operator")


def read(path: Path) -> dict:
    """Every message of the file through rosbags (deserialized), by topic: (log ns, msg)."""
    from rosbags.highlevel import AnyReader

    out: dict = {}
    with AnyReader([path]) as reader:
        for conn, t, raw in reader.messages():
            out.setdefault(conn.topic, []).append((t, reader.deserialize(raw, conn.msgtype)))
    return out


def check(path: Path, window_s: float) -> dict:
    topics = read(path)
    events = topics["/mj_manipulator/events"]
    # the moment: the first failure, or (an operator's stop: no failure) the stop's request
    failure = [t for t, m in events if m.function in ("failure", "stop_requested")][0] * 1e-9
    results = [t * 1e-9 for t, m in events if m.function == "result"]
    states = topics["/joint_states"]
    times = np.array([t for t, _ in states]) * 1e-9
    last = times >= times[-1] - 0.1
    pos = np.array([list(m.position) for _, m in states])[last]
    rest_note = [m.msg for _, m in events if m.function == "black_box"]
    return {"before_failure_s": round(failure - times[0], 3),
            "covers_window": bool(failure - times[0] >= window_s - 0.01),
            "after_failure_s": round(times[-1] - failure, 3),
            "after_every_result": bool(times[-1] >= max(results)),
            "at_rest_at_end": bool(np.abs(pos - pos[-1]).max() <= 1e-4),
            "messages": sum(len(v) for v in topics.values()),
            "bytes": path.stat().st_size, "topics": sorted(topics),
            "rest": rest_note[0].split(";")[0] if rest_note else None}


def one(ex: MultiArmExecutor, sim: SimNode, plan, kind: str, at: float) -> dict:
    here = ex.start_check.measured(list(plan.arm_names))
    start = {a: plan[a].positions[0] for a in plan.arm_names}
    if max(float(np.max(np.abs(here[a] - start[a]))) for a in plan.arm_names) > 1e-3:
        moved = ex.execute(approach_plan(ex.config, here, start, 0.5, 0.5))
        assert moved.succeeded, moved.summary()

    if kind == "abort":   # counted from the goal's start: set as it is stamped
        t = at_plan_time(ex, -60.0, lambda: sim.set_faults("left", abort_after_s=at), 60.0)
    elif kind == "watch":
        t = at_plan_time(ex, at, lambda: sim.set_faults("left", freeze=True), 60.0)
    else:
        t = at_plan_time(ex, at, lambda: ex.stop("operator stop (bench)"), 60.0)
    report = ex.execute(plan)
    t.join(70.0)
    sim.set_faults("left", abort_after_s=None, freeze=False)
    f = report.first_failure
    row = {"kind": kind, "at_plan_time_s": round(at, 2),
           "reason": None if f is None else f.reason.value,
           "file": report.black_box_path}
    if report.black_box_path is None:
        return row
    written = ex.black_box.wait_written(30.0)
    row.update(written=written, error=ex.black_box.last_error)
    row.update(check(Path(report.black_box_path), ex.config.execution.black_box_s))
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pace", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, RosContext() as ros:
        config = load_config_with_model(config_file("sim_openarm.yaml"))
        sc = sim_config(config)
        sc = dataclasses.replace(sc, sim=dataclasses.replace(
            sc.sim, use_sim_time=True, real_time_factor=args.pace))
        sim = SimNode(sc, context=ros.context).start()
        config = config.with_execution(use_sim_time=True, black_box_dir=tmp).with_pace(args.pace)
        try:
            with MultiArmExecutor(config, context=ros.context,
                                  preflight=preflight_for(config)) as ex:
                # the window is wall seconds: the executor keeps them from its start
                time.sleep(config.execution.black_box_s)
                for _ in range(args.runs):
                    for kind in KINDS:
                        at = float(rng.uniform(1.0, 13.0))
                        rows.append(one(ex, sim, plan, kind, at))
                        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            sim.close()
    ok = [r for r in rows if r.get("covers_window") and r.get("after_every_result")
          and r.get("at_rest_at_end") and r.get("written") and not r.get("error")]
    print(json.dumps({"benchmark": "black_box_crossing", "pace": args.pace,
                      "black_box_s": config.execution.black_box_s, "runs": len(rows),
                      "every_check_met": len(ok), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
