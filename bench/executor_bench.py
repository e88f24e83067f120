"""Executor latencies on loopback DDS. Prints JSON; not a test (no thresholds asserted).

For 2 and 4 arms, N executions each, where one arm aborts 50 ms after the start and the others
run until canceled:

- acceptance latency per arm: ``accepted_at - goal_sent_at``;
- stamp margin per arm: ``start_stamp - accepted_at`` (time left before the shared start);
- peer-cancel latency: from the failing arm's result arriving to each peer's cancel
  acknowledgement (``cancel_acknowledged_at - failing.result_at``); targets: median <= 10 ms,
  p99 <= 50 ms.

Recording: half as many executions again, every third run recorded as a bag (rosbag2, MCAP),
interleaved with the others; its peer-cancel latency beside the unrecorded runs' (the recorder
runs off the arm threads).

Baseline, same run, same servers: a naive single-threaded client (goals sent one after another
with stamp 0; results polled every 20 ms; peers canceled one after another, each cancel awaited
before the next) — the shape of the prior Python layers. Its latency is measured from the
failing result's future completing to each peer's cancel response.

The scripted controllers keep each finished goal for its result 15 minutes (as rclcpp's action
servers do, ``ros/action_results.RESULT_TIMEOUT_S``); a cancel costs a server more the more
goals it keeps, so the peer-cancel figure grows over a long run, and a comparison with code
whose controllers kept 10 s (rclpy's default: before bbb6ca3) must give both the same
retention (docs/executor.md, "Measured").

Usage: python bench/executor_bench.py [--executions 200] [--arms 2 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor  # noqa: E402

from factories import make_config, make_plan  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.conversion import trajectory_msg  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402
from mj_manipulator_ros.ros.scripted_controller import Behavior, ScriptedController  # noqa: E402
from mj_manipulator_ros.ros.spinner import BackgroundSpinner  # noqa: E402

ABORT_AFTER_S = 0.05


def stats_ms(values: list[float]) -> dict:
    a = np.asarray(values) * 1e3
    return {"n": int(a.size), "median": round(float(np.median(a)), 3),
            "p99": round(float(np.percentile(a, 99)), 3), "max": round(float(a.max()), 3),
            "min": round(float(a.min()), 3)}


def naive_cancel_latencies(ros: RosContext, arms: list[str], plan, executions: int) -> list[float]:
    node = rclpy.create_node("naive_client", context=ros.context)
    ex = SingleThreadedExecutor(context=ros.context)
    ex.add_node(node)
    clients = {a: ActionClient(node, FollowJointTrajectory, f"/{a}_arm_controller/follow_joint_trajectory")
               for a in arms}
    for c in clients.values():
        c.wait_for_server(timeout_sec=10.0)
    out = []
    try:
        for _ in range(executions):
            handles = {}
            for a in arms:  # one after another, stamp 0
                goal = FollowJointTrajectory.Goal(trajectory=trajectory_msg(plan[a]))
                f = clients[a].send_goal_async(goal)
                ex.spin_until_future_complete(f, timeout_sec=5.0)
                handles[a] = f.result()
            results = {a: h.get_result_async() for a, h in handles.items()}
            arrived = {}
            for a, f in results.items():
                f.add_done_callback(lambda _f, a=a: arrived.setdefault(a, time.monotonic()))
            deadline = time.monotonic() + 10.0
            while arms[0] not in arrived and time.monotonic() < deadline:  # poll every 20 ms
                ex.spin_once(timeout_sec=0.0)
                time.sleep(0.02)
            t_fail = arrived[arms[0]]
            for a in arms[1:]:  # cancel peers one after another, each awaited
                cf = handles[a].cancel_goal_async()
                ex.spin_until_future_complete(cf, timeout_sec=5.0)
                out.append(time.monotonic() - t_fail)
            for a in arms[1:]:
                ex.spin_until_future_complete(results[a], timeout_sec=5.0)
    finally:
        for c in clients.values():
            c.destroy()
        ex.shutdown()
        node.destroy_node()
    return out


def bench(n_arms: int, executions: int) -> dict:
    arms = [f"arm{k}" for k in range(n_arms)]
    with RosContext() as ros:
        server_node = rclpy.create_node("bench_controllers", context=ros.context)
        controllers = [ScriptedController(server_node, f"/{a}_arm_controller/follow_joint_trajectory",
                                          Behavior.ABORT_AFTER if i == 0 else Behavior.NEVER_FINISH,
                                          ABORT_AFTER_S) for i, a in enumerate(arms)]
        spin = MultiThreadedExecutor(num_threads=4, context=ros.context)
        spin.add_node(server_node)
        accept, margin, peer_cancel, failures = [], [], [], 0
        recorded_cancel = []
        plan = make_plan(tuple(arms), duration=2.0)
        bags = Path(tempfile.mkdtemp(prefix="mjmr-bench-bags-"))
        with BackgroundSpinner(spin, "bench-controllers"):
            # the peers canceled (the cancel path this measures): by default a failed arm's
            # peers take a controlled stop, which a never-finishing controller never ends
            config = make_config(tuple(arms), start_lead_s=0.1, cancel_peers_on_failure=True)
            with MultiArmExecutor(config, context=ros.context) as executor:
                for k in range(executions + executions // 2):
                    record = k % 3 == 2  # every third run recorded, interleaved
                    r = executor.execute(plan, record=str(bags / f"run{k}") if record else None)
                    failing = r.arms[arms[0]]
                    if r.first_failure is None or r.first_failure.arm != arms[0]:
                        failures += 1
                        continue
                    for a in arms:
                        ar = r.arms[a]
                        if a != arms[0]:
                            (recorded_cancel if record else peer_cancel).append(
                                ar.cancel_acknowledged_at - failing.result_at)
                        if record:
                            continue
                        accept.append(ar.accepted_at - ar.goal_sent_at)
                        margin.append(r.start_stamp - ar.accepted_at)
            shutil.rmtree(bags, ignore_errors=True)
            naive = naive_cancel_latencies(ros, arms, plan, max(20, executions // 4))
            for c in controllers:
                c.shutdown()
        server_node.destroy_node()
    ours = stats_ms(peer_cancel)
    base = stats_ms(naive)
    return {
        "arms": n_arms, "executions": executions, "unexpected_outcomes": failures,
        "acceptance_latency_ms": stats_ms(accept),
        "stamp_margin_ms": stats_ms(margin),
        "peer_cancel_latency_ms": ours,
        "naive_baseline_cancel_latency_ms": base,
        "naive_over_ours_median": round(base["median"] / ours["median"], 1) if ours["median"] else None,
        "peer_cancel_latency_recording_ms": stats_ms(recorded_cancel),
        "recording_over_not_median": round(stats_ms(recorded_cancel)["median"] / ours["median"], 2)
        if ours["median"] else None,
        "targets": {"peer_cancel_median_ms": 10, "peer_cancel_p99_ms": 50},
        "meets_targets": ours["median"] <= 10 and ours["p99"] <= 50,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=200)
    parser.add_argument("--arms", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()
    results = [bench(n, args.executions) for n in args.arms]
    print(json.dumps({"benchmark": "executor_latency", "loopback": True,
                      "cpus": os.cpu_count(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
