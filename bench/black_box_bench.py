"""The black box's cost. Prints JSON; not a test (no thresholds asserted).

Fixture: scripted controllers on loopback DDS (``ros/scripted_controller.py``; the first arm
aborts 50 ms after the start, the others run until canceled, as in ``executor_bench.py``) and a
500 Hz ``/joint_states`` publisher of 14 joints not in the plan (the ring fills as on a robot;
no arm's reading changes, so the execution watch is not involved). Every execution fails, so
with the black box on every one writes a file.

- **Peer-cancel latency, on vs off**: from the failing arm's result to each peer's cancel
  acknowledgement, in blocks of executions, off on on off (repeated: a slow drift of the
  machine or the fixture counts for both kinds alike), between an executor with the black box
  off and one with it on (each made for its block: no executor's subscriptions run during the
  other's block), 2 and 4 arms; the ratio on/off of the median and p99 (same run). ``--same``:
  both kinds of block off (the ratio's noise floor).
- **Memory over N executions** in one process, black box on (2 arms): the process's resident
  set (VmRSS) and the ring's size after every 100th execution, files left in the directory.

Usage: python bench/black_box_bench.py [--blocks 8] [--per-block 25] [--executions 1000]
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

import mj_manipulator_ros  # noqa: E402,F401  (one BLAS thread, before numpy)
import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from factories import make_config, make_plan  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402
from mj_manipulator_ros.ros.scripted_controller import Behavior, ScriptedController  # noqa: E402
from mj_manipulator_ros.ros.spinner import BackgroundSpinner  # noqa: E402

ABORT_AFTER_S = 0.05
#: the scripted servers forget a finished goal after this long (s; the executor has read its
#: result by then): with the servers' default (15 minutes, as rclcpp's) every goal stays in
#: the status each cancel publishes, and the peer-cancel latency grew from block to block
#: (3.8 -> 10.5 ms over 160 executions, no black box at all), which favoured the first block
#: of every pair
RESULT_TIMEOUT_S = 2.0
JOINT_STATE_HZ = 500.0


def stats_ms(values: list[float]) -> dict:
    a = np.asarray(values) * 1e3
    if a.size == 0:
        return {"n": 0}
    return {"n": int(a.size), "median": round(float(np.median(a)), 2),
            "p99": round(float(np.percentile(a, 99)), 2), "max": round(float(a.max()), 2)}


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Servers:
    """The arms' scripted controllers and the joint-state publisher, spun in the background."""

    def __init__(self, ros: RosContext, arms: list[str]) -> None:
        self.node = rclpy.create_node("bench_black_box_servers", context=ros.context)
        self.controllers = [
            ScriptedController(self.node, f"/{a}_arm_controller/follow_joint_trajectory",
                               Behavior.ABORT_AFTER if i == 0 else Behavior.NEVER_FINISH,
                               ABORT_AFTER_S, result_timeout=RESULT_TIMEOUT_S)
            for i, a in enumerate(arms)]
        pub = self.node.create_publisher(JointState, "/joint_states", 10)
        names = [f"other_j{k}" for k in range(14)]

        def publish() -> None:
            msg = JointState(name=names, position=[0.1] * 14, velocity=[0.0] * 14,
                             effort=[0.0] * 14)
            msg.header.stamp = self.node.get_clock().now().to_msg()
            pub.publish(msg)
        self.timer = self.node.create_timer(1.0 / JOINT_STATE_HZ, publish)
        self.spin = MultiThreadedExecutor(num_threads=4, context=ros.context)
        self.spin.add_node(self.node)
        self.spinner = BackgroundSpinner(self.spin, "bench-black-box").start()

    def close(self) -> None:
        self.spinner.stop()
        for c in self.controllers:
            c.shutdown()
        self.node.destroy_node()


def run_block(ros, arms, plan, executions: int, black_box_s: float, directory: Path,
              into: list, unexpected: list) -> MultiArmExecutor:
    config = make_config(tuple(arms), start_lead_s=0.1, cancel_peers_on_failure=True,
                         black_box_s=black_box_s, black_box_dir=str(directory))
    with MultiArmExecutor(config, context=ros.context) as executor:
        for _ in range(executions):
            r = executor.execute(plan)
            failing = r.arms[arms[0]]
            if r.first_failure is None or r.first_failure.arm != arms[0]:
                unexpected.append(r.first_failure.reason.value if r.first_failure else "none")
                continue
            if black_box_s > 0 and r.black_box_path is None:
                unexpected.append("no black box file")
            into.extend(r.arms[a].cancel_acknowledged_at - failing.result_at for a in arms[1:])
    return executor


def latency(n_arms: int, blocks: int, per_block: int, same: bool = False) -> dict:
    """``same``: the "on" blocks with the black box off too (the comparison's noise floor)."""
    arms = [f"arm{k}" for k in range(n_arms)]
    plan = make_plan(tuple(arms), duration=2.0)
    directory = Path(tempfile.mkdtemp(prefix="mjmr-bench-black-box-"))
    off, on, unexpected, medians = [], [], [], []
    try:
        with RosContext() as ros:
            servers = Servers(ros, arms)
            try:
                for b in range(blocks):
                    is_on = b % 4 in (1, 2)   # off on on off, off on on off: a drift cancels
                    black_box_s = (0.0 if same else 10.0) if is_on else 0.0
                    block: list[float] = []
                    run_block(ros, arms, plan, per_block, black_box_s, directory, block,
                              unexpected)
                    (on if is_on else off).extend(block)
                    medians.append(("on" if is_on else "off",
                                    round(float(np.median(block)) * 1e3, 2) if block else None))
            finally:
                servers.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    so, sf = stats_ms(on), stats_ms(off)
    return {"arms": n_arms, "executions_each": len(off) // max(1, n_arms - 1),
            "peer_cancel_off_ms": sf, "peer_cancel_on_ms": so,
            "on_over_off_median": round(so["median"] / sf["median"], 3),
            "on_over_off_p99": round(so["p99"] / sf["p99"], 3),
            "block_medians_ms": medians,
            "unexpected_outcomes": unexpected}


def memory(executions: int) -> dict:
    arms = ["arm0", "arm1"]
    plan = make_plan(tuple(arms), duration=2.0)
    directory = Path(tempfile.mkdtemp(prefix="mjmr-bench-black-box-mem-"))
    samples, unexpected = [], []
    config = make_config(tuple(arms), start_lead_s=0.1, cancel_peers_on_failure=True,
                         black_box_s=10.0, black_box_dir=str(directory))
    t0 = time.monotonic()
    try:
        with RosContext() as ros:
            servers = Servers(ros, arms)
            try:
                with MultiArmExecutor(config, context=ros.context) as executor:
                    for k in range(1, executions + 1):
                        r = executor.execute(plan)
                        if r.black_box_path is None:
                            unexpected.append(k)
                        if k == 1 or k % 100 == 0:
                            executor.black_box.wait_written(20.0)
                            ring = executor.black_box.ring
                            samples.append({"execution": k, "rss_mb": round(rss_mb(), 1),
                                            "ring_messages": len(ring),
                                            "ring_mb": round(ring.nbytes / 1e6, 2),
                                            "elapsed_s": round(time.monotonic() - t0, 1)})
                            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
                    files = len(list(directory.glob("*.mcap")))
            finally:
                servers.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rss = [s["rss_mb"] for s in samples]
    return {"executions": executions, "samples": samples, "files_kept": files,
            "keep_setting": config.execution.black_box_keep,
            "rss_growth_mb_from_100th": round(rss[-1] - rss[1], 1) if len(rss) > 2 else None,
            "executions_without_file": len(unexpected)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--per-block", type=int, default=25)
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--arms", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--same", action="store_true",
                        help="both kinds of block with the black box off: the noise floor")
    args = parser.parse_args()
    out = {"benchmark": "black_box", "loopback": True, "cpus": os.cpu_count(),
           "joint_state_hz": JOINT_STATE_HZ,
           "same": args.same,
           "latency": [latency(n, args.blocks, args.per_block, args.same) for n in args.arms]}
    if not args.skip_memory:
        out["memory"] = memory(args.executions)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
