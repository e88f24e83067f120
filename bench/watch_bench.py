"""Execution-watch benchmark. Prints JSON; not a test.

1. Cost of the watch per JointState message (us), on the OpenArm pair following the crossing
   plan (14 joints), against the cost of merely merging the message by name (the monitor's own
   bookkeeping) measured in the same run.
2. Detection latency for an injected lag: the simulated OpenArm pair (on sim time, 3x real
   time) running the crossing plan, the right arm's commands delayed by 150 ms; per execution, from the first joint-state message
   whose stamp shows the threshold crossed (the same watch replayed over the recorded messages)
   to the peer's cancel request, in ms and in joint-state periods (median, p99).
3. False trips: synchronized executions of the wave plan on the healthy pair (none expected;
   measured 0 in 100), on sim time (3x), where a stall stops the clock too; and again on the
   system clock at real time beside one busy loop (a ``while True: pass`` process), where a
   stall of the simulator or of the executor is seen by the watch: every failure counted, by
   reason.
4. Speed change: 1.0 -> 0.5 one second into the wave plan; the largest progress skew between
   the arms the watch measured (the arms should keep one plan time).

Usage: python bench/watch_bench.py [--runs 20] [--clean 100] [--busy-clean 20]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ROS_DOMAIN_ID", str(200 + os.getpid() % 30))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from mj_manipulator_ros.core.execution_watch import ExecutionWatch  # noqa: E402
from mj_manipulator_ros.core.interpolation import sample  # noqa: E402
from mj_manipulator_ros.core.plan_io import load_plan  # noqa: E402
from mj_manipulator_ros.model.limits import load_config_with_model  # noqa: E402
from mj_manipulator_ros.resources import config_file, share_dir  # noqa: E402


def cost_per_message(n: int = 2000) -> dict:
    config = load_config_with_model(config_file("sim_openarm.yaml"))
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    names = [j for a in plan.arm_names for j in plan[a].joint_names]
    times = np.linspace(0.0, plan.duration, n)
    msgs = [np.concatenate([sample(plan[a], [t])[0][0] for a in plan.arm_names]) for t in times]
    watch = ExecutionWatch(plan, 0.0, config.with_execution(path_tolerance_rad=0.0,
                                                            max_progress_skew_s=0.0))
    t0 = time.perf_counter()
    for t, q in zip(times, msgs):
        watch.on_joint_state(names, q, float(t))
    per_watch = (time.perf_counter() - t0) / n
    latest: dict = {}
    t0 = time.perf_counter()
    for t, q in zip(times, msgs):
        for name, value in zip(names, q):
            latest[name] = (float(value), float(t))
    per_merge = (time.perf_counter() - t0) / n
    return {"watch_us_per_message": round(per_watch * 1e6, 1),
            "merge_only_us_per_message": round(per_merge * 1e6, 1),
            "joints": len(names)}


def executions(runs: int, clean: int) -> dict:
    from mj_manipulator_ros.core.approach import approach_plan
    from mj_manipulator_ros.core.sync import FailureReason
    from mj_manipulator_ros.ros.context import RosContext
    from mj_manipulator_ros.ros.executor import MultiArmExecutor
    from mj_manipulator_ros.sim.sim_config import sim_config
    from mj_manipulator_ros.sim.sim_node import SimNode

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["sim"].update(use_sim_time=True, real_time_factor=3.0, joint_state_rate_hz=100.0)
    # approach moves (back to a plan's start) below the speed at which the watch estimates
    # progress: the injected lag is the measured runs' business, not theirs
    data["execution"].update(use_sim_time=True, start_lead_s=0.5, approach_speed_fraction=0.05)
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "bench.yaml"
    path.write_text(yaml.safe_dump(data))
    config = load_config_with_model(path)
    data["sim"]["faults"] = {"right": {"command_latency_s": 0.15}}
    path_lag = tmp / "lag.yaml"
    path_lag.write_text(yaml.safe_dump(data))
    with_latency = load_config_with_model(path_lag)
    period = 1.0 / data["sim"]["joint_state_rate_hz"]
    wave = load_plan(share_dir() / "config/plans/openarm_wave.yaml")
    crossing_plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    latencies, periods, false_trips, reasons = [], [], 0, {}
    with RosContext() as ros:
        sim = SimNode(sim_config(config), context=ros.context).start()
        try:
            with MultiArmExecutor(config, context=ros.context) as executor:
                for _ in range(clean):
                    report = executor.execute(wave)
                    f = report.first_failure
                    if f is not None and f.reason in (FailureReason.TRACKING_ERROR,
                                                      FailureReason.PROGRESS_SKEW):
                        false_trips += 1
                # one speed for every arm: 1.0 -> 0.5 a second into the wave plan
                import threading
                skews = []
                for _ in range(5):
                    def slow_down() -> None:
                        deadline = time.monotonic() + 30
                        while (executor.current_stamp is None or executor.now()
                               < executor.current_stamp.seconds + 1.0) and time.monotonic() < deadline:
                            time.sleep(0.005)
                        executor.set_speed(0.5)
                    t = threading.Thread(target=slow_down)
                    t.start()
                    report = executor.execute(wave)
                    t.join(30)
                    if report.succeeded:
                        skews.append(max(r.max_progress_skew for r in report.arms.values()))
                    measured = executor.start_check.measured(wave.arm_names)
                    executor.execute(approach_plan(config, measured, {
                        a: wave[a].positions[0] for a in wave.arm_names}, 0.5))
        finally:
            sim.close()
        # the command delay line is built with the simulator: a second one, right arm delayed
        sim = SimNode(sim_config(with_latency), context=ros.context).start()
        try:
            with MultiArmExecutor(config, context=ros.context) as executor:
                for k in range(runs):
                    record = tmp / f"run{k}.jsonl"
                    report = executor.execute(crossing_plan, record=str(record), approach=True)
                    approach = executor.last_approach_report
                    if approach is not None and not approach.succeeded:
                        reasons["approach_failed"] = reasons.get("approach_failed", 0) + 1
                        continue
                    f = report.first_failure
                    reasons[f.reason.value if f else "none"] = reasons.get(
                        f.reason.value if f else "none", 0) + 1
                    if f is None or f.reason not in (FailureReason.TRACKING_ERROR,
                                                     FailureReason.PROGRESS_SKEW):
                        continue
                    lines = [json.loads(x) for x in record.read_text().splitlines()]
                    replay = ExecutionWatch(crossing_plan, report.start_stamp, config)
                    crossing = next((m["t"] for m in lines if replay.on_joint_state(
                        m["name"], m["position"], m["t"]) is not None), None)
                    peer = report.arms["left"].cancel_requested_at
                    if crossing is not None and peer is not None:
                        latencies.append(peer - crossing)
                        periods.append((peer - crossing) / period)

        finally:
            sim.close()
    lat = np.array(latencies) * 1e3
    return {
        "speed_change_runs": len(skews),
        "speed_change_progress_skew_ms_max": round(max(skews) * 1e3, 1) if skews else None,
        "clean_runs": clean, "false_trips": false_trips,
        "lag_runs": runs, "lag_outcomes": reasons,
        "detection_ms_median": round(float(np.median(lat)), 1) if lat.size else None,
        "detection_ms_p99": round(float(np.percentile(lat, 99)), 1) if lat.size else None,
        "detection_periods_median": round(float(np.median(periods)), 2) if periods else None,
        "detection_periods_max": round(float(np.max(periods)), 2) if periods else None,
        "joint_state_period_ms": period * 1e3,
        "target_detection_periods": 2.0,
    }


def busy_system_clock(runs: int) -> dict:
    """The healthy pair on the system clock at real time, one busy loop beside it: outcomes of
    ``runs`` wave executions (each from the plan's start)."""
    import subprocess
    import sys

    from mj_manipulator_ros.core.approach import approach_plan
    from mj_manipulator_ros.ros.context import RosContext
    from mj_manipulator_ros.ros.executor import MultiArmExecutor
    from mj_manipulator_ros.sim.sim_config import sim_config
    from mj_manipulator_ros.sim.sim_node import SimNode

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["sim"].update(use_sim_time=False, real_time_factor=1.0, joint_state_rate_hz=100.0)
    data["execution"].update(use_sim_time=False)
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "busy.yaml"
    path.write_text(yaml.safe_dump(data))
    config = load_config_with_model(path)
    wave = load_plan(share_dir() / "config/plans/openarm_wave.yaml")
    outcomes: dict = {}
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with RosContext() as ros:
            sim = SimNode(sim_config(config), context=ros.context).start()
            try:
                with MultiArmExecutor(config, context=ros.context) as executor:
                    for _ in range(runs):
                        measured = executor.start_check.measured(wave.arm_names)
                        executor.execute(approach_plan(config, measured, {
                            a: wave[a].positions[0] for a in wave.arm_names}, 0.5))
                        report = executor.execute(wave)
                        f = report.first_failure
                        key = f.reason.value if f else "succeeded"
                        outcomes[key] = outcomes.get(key, 0) + 1
                health = sim.shared.health().summary()
            finally:
                sim.close()
    finally:
        busy.kill()
        busy.wait(10)
    return {"busy_loops": 1, "clock": "system", "busy_runs": runs, "busy_outcomes": outcomes,
            "busy_false_trips": runs - outcomes.get("succeeded", 0), "busy_sim_health": health}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--clean", type=int, default=100)
    parser.add_argument("--busy-clean", type=int, default=20)
    parser.add_argument("--busy-only", action="store_true",
                        help="only the system-clock runs beside a busy loop")
    args = parser.parse_args()
    if args.busy_only:
        out = {"benchmark": "execution_watch", **busy_system_clock(args.busy_clean)}
    else:
        out = {"benchmark": "execution_watch", **cost_per_message(),
               **executions(args.runs, args.clean), **busy_system_clock(args.busy_clean)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
