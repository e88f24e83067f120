"""Every accepted combined goal gets exactly one terminal result. Prints JSON; not a test.

The execution node's combined action over two scripted arm controllers (in this process, real
DDS on loopback). For each of ``--goals`` goals, seeded: each arm's controller behaves at random
(succeeds; aborts after a random time; rejects; accepts late, past the start stamp), the client
cancels the combined goal at a random moment in a third of the goals, and asks for the result
after a random delay (up to ``--max-ask-delay`` s). Counted per goal: accepted or rejected, the
terminal status the client got (never UNKNOWN: that is a lost result), whether a result came at
all within the bound, and the server's report count (exactly one per accepted goal).

Usage: python bench/combined_results_bench.py [--goals 200] [--seed 7] [--max-ask-delay 1.0]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
os.environ.setdefault("ROS_DOMAIN_ID", str(180 + os.getpid() % 20))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import rclpy  # noqa: E402
from action_msgs.msg import GoalStatus  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor  # noqa: E402

from factories import make_config, make_plan  # noqa: E402
from mj_manipulator_ros.apps.demo import combined_trajectory  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.execution_node import CombinedTrajectoryServer  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402
from mj_manipulator_ros.ros.scripted_controller import Behavior, ScriptedController  # noqa: E402
from mj_manipulator_ros.ros.spinner import BackgroundSpinner  # noqa: E402

STATUS = {GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_ABORTED: "aborted",
          GoalStatus.STATUS_CANCELED: "canceled", GoalStatus.STATUS_UNKNOWN: "UNKNOWN"}


def spin_until(executor, future, timeout: float) -> bool:
    executor.spin_until_future_complete(future, timeout_sec=timeout)
    return future.done()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--goals", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-ask-delay", type=float, default=1.0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    arms = ("left", "right")
    config = make_config(arms, joints=3, start_lead_s=0.25, max_clock_offset_s=0.0,
                         start_tolerance_rad=0.0)
    plan = make_plan(arms, joints=3, duration=0.4)
    goal = FollowJointTrajectory.Goal(trajectory=combined_trajectory(plan))
    rows, started = [], time.monotonic()
    with RosContext() as ros:
        ctl_node = rclpy.create_node("bench_scripted", context=ros.context)
        ctl = {a: ScriptedController(ctl_node, f"/{a}_arm_controller/follow_joint_trajectory")
               for a in arms}
        ctl_exec = MultiThreadedExecutor(num_threads=4, context=ros.context)
        ctl_exec.add_node(ctl_node)
        executor = MultiArmExecutor(config, context=ros.context)
        node = rclpy.create_node("bench_execution", context=ros.context)
        server = CombinedTrajectoryServer(node, config, executor, "/bench_combined")
        spin = MultiThreadedExecutor(num_threads=4, context=ros.context)
        spin.add_node(node)
        client_node = rclpy.create_node("bench_client", context=ros.context)
        client = ActionClient(client_node, FollowJointTrajectory, "/bench_combined")
        client_exec = SingleThreadedExecutor(context=ros.context)
        client_exec.add_node(client_node)
        try:
            with BackgroundSpinner(ctl_exec, "bench-ctl"), BackgroundSpinner(spin, "bench-srv"):
                assert client.wait_for_server(timeout_sec=10.0)
                for k in range(args.goals):
                    kinds = {}
                    for a, c in ctl.items():
                        kind = rng.choice(["succeed", "succeed", "abort", "reject", "late"])
                        kinds[a] = kind
                        c.behavior = {"succeed": Behavior.SUCCEED, "abort": Behavior.ABORT_AFTER,
                                      "reject": Behavior.REJECT,
                                      "late": Behavior.SLOW_ACCEPT}[kind]
                        c.after = rng.uniform(0.0, 0.5) if kind == "abort" else \
                            rng.uniform(0.26, 0.45)
                    cancel_at = rng.uniform(0.0, 0.8) if rng.random() < 1 / 3 else None
                    ask_after = rng.uniform(0.0, args.max_ask_delay)
                    before = server.last_report
                    sent = client.send_goal_async(goal)
                    if not spin_until(client_exec, sent, 10.0):
                        rows.append({"goal": k, "accepted": None, "result": "no answer"})
                        continue
                    handle = sent.result()
                    row = {"goal": k, "arms": kinds, "accepted": handle.accepted,
                           "cancel_at": cancel_at, "ask_after": round(ask_after, 3)}
                    if handle.accepted:
                        t0 = time.monotonic()
                        if cancel_at is not None:
                            while time.monotonic() - t0 < cancel_at:
                                client_exec.spin_once(timeout_sec=0.01)
                            spin_until(client_exec, handle.cancel_goal_async(), 10.0)
                        while time.monotonic() - t0 < ask_after:
                            client_exec.spin_once(timeout_sec=0.01)
                        got = handle.get_result_async()
                        row["result"] = (STATUS.get(got.result().status, str(got.result().status))
                                         if spin_until(client_exec, got, 30.0) else "none")
                        deadline = time.monotonic() + 10.0
                        while server.last_report is before and time.monotonic() < deadline:
                            time.sleep(0.01)
                        row["report"] = server.last_report is not before
                    rows.append(row)
        finally:
            client.destroy()
            client_exec.shutdown()
            client_node.destroy_node()
            server.destroy()
            executor.close()
            node.destroy_node()
            for c in ctl.values():
                c.shutdown()
            ctl_node.destroy_node()
    accepted = [r for r in rows if r["accepted"]]
    out = {"conditions": {"goals": args.goals, "seed": args.seed, "cores": os.cpu_count(),
                          "max_ask_delay_s": args.max_ask_delay,
                          "seconds": round(time.monotonic() - started, 1)},
           "accepted": len(accepted), "rejected": sum(r["accepted"] is False for r in rows),
           "results": dict(collections.Counter(r["result"] for r in accepted)),
           "lost (UNKNOWN or none)": sum(r["result"] in ("UNKNOWN", "none") for r in accepted),
           "accepted without a server report": sum(not r.get("report") for r in accepted),
           "canceled by the client": sum(r["cancel_at"] is not None for r in accepted)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
