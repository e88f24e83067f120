"""The executor across hosts: loopback against network namespaces. Prints JSON; not a test.

Two topologies, the same processes: *loopback* (every process in this machine's namespace) and
*namespaces* (each arm's controller in its own network namespace, the executor in another, on a
bridge; tools/netns_topology.sh). DDS over UDP in both (FASTDDS_BUILTIN_TRANSPORTS=UDPv4), so
only the path differs.

Per topology:
- for 2, 4 and 8 arms (one scripted controller process per arm; arm0 aborts 50 ms after its
  start, the others run until canceled): peer-cancel latency (the failing arm's result to each
  peer's cancel acknowledgement) and goal acceptance latency, median and p99;
- the limit: a bare FollowJointTrajectory cancel round trip (cancel request to response) between
  two plain rclpy nodes on the same path (client where the executor runs, server where an arm's
  controller runs), measured in the same run; and, for N arms, the same plain client canceling
  N-1 plain servers at once (the fan-out a peer cancel is: on 2 cores, rclpy's per-goal work
  serializes);
- start skew: the wave plan on the two-arm simulator (one process per arm), motion onset from
  each host's joint states.

Goal: peer-cancel median within 1.5x of the bare round trip at every arm count.

Usage: python bench/multihost_bench.py [--executions 60] [--arms 2 4 8] [--skew-runs 4]
Needs root for the namespaces (skipped, with the reason, otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))
PY = sys.executable

from mj_manipulator_ros.core.report import ExecutionStatus  # noqa: E402


def stats_ms(values) -> dict:
    import numpy as np

    v = np.asarray(values, dtype=float) * 1e3
    if not v.size:
        return {"n": 0}
    return {"n": int(v.size), "median": round(float(np.median(v)), 3),
            "p99": round(float(np.percentile(v, 99)), 3), "max": round(float(v.max()), 3)}


# ---- children (run where the executor runs) -----------------------------------------------------
def child_executor(n_arms: int, executions: int) -> dict:
    from factories import make_config, make_plan
    from mj_manipulator_ros.ros.context import RosContext
    from mj_manipulator_ros.ros.executor import MultiArmExecutor

    arms = [f"arm{k}" for k in range(n_arms)]
    plan = make_plan(tuple(arms), duration=2.0)
    peer, accept, odd = [], [], 0
    with RosContext() as ros:
        config = make_config(tuple(arms), start_lead_s=0.15, server_wait_s=30.0)
        with MultiArmExecutor(config, context=ros.context) as executor:
            for _ in range(executions):
                r = executor.execute(plan)
                if r.first_failure is None or r.first_failure.arm != arms[0]:
                    odd += 1
                    continue
                failing = r.arms[arms[0]]
                for a in arms:
                    ar = r.arms[a]
                    accept.append(ar.accepted_at - ar.goal_sent_at)
                    if a != arms[0] and ar.cancel_acknowledged_at is not None:
                        peer.append(ar.cancel_acknowledged_at - failing.result_at)
    return {"peer_cancel": peer, "accept": accept, "unexpected": odd}


def child_bare_client(executions: int, fanout: int = 1) -> dict:
    """Plain rclpy: send a goal to each of ``fanout`` bare servers, then cancel them all at once
    and time each cancel request -> response (fanout 1: the plain round trip)."""
    import rclpy
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor

    rclpy.init()
    node = rclpy.create_node("bare_client")
    clients = [ActionClient(node, FollowJointTrajectory, f"/bare{k}/follow_joint_trajectory")
               for k in range(fanout)]
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    rtt = []
    try:
        assert all(c.wait_for_server(timeout_sec=30.0) for c in clients), "bare server not found"
        for _ in range(executions):
            handles = []
            for c in clients:
                send = c.send_goal_async(FollowJointTrajectory.Goal())
                ex.spin_until_future_complete(send, timeout_sec=5.0)
                handles.append(send.result())
            t0 = time.monotonic()
            cancels = [h.cancel_goal_async() for h in handles]
            done = {}
            while len(done) < len(cancels) and time.monotonic() - t0 < 5.0:
                ex.spin_once(timeout_sec=0.001)
                for k, f in enumerate(cancels):
                    if k not in done and f.done():
                        done[k] = time.monotonic() - t0
            rtt.extend(done.values())
            for h in handles:
                result = h.get_result_async()
                ex.spin_until_future_complete(result, timeout_sec=5.0)
    finally:
        for c in clients:
            c.destroy()
        node.destroy_node()
        ex.shutdown()
        rclpy.try_shutdown()
    return {"cancel_rtt": rtt}


def child_bare_server(action: str) -> None:
    """Plain rclpy FollowJointTrajectory server: accepts, runs until canceled."""
    import rclpy
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor

    rclpy.init()
    node = rclpy.create_node("bare_server")

    def execute(handle):
        while not handle.is_cancel_requested and rclpy.ok():
            time.sleep(0.001)
        handle.canceled()
        return FollowJointTrajectory.Result()
    ActionServer(node, FollowJointTrajectory, action, execute,
                 goal_callback=lambda _g: GoalResponse.ACCEPT,
                 cancel_callback=lambda _h: CancelResponse.ACCEPT,
                 callback_group=ReentrantCallbackGroup())
    ex = MultiThreadedExecutor(num_threads=4)
    ex.add_node(node)
    try:
        ex.spin()
    except KeyboardInterrupt:
        pass
    finally:
        ex.shutdown(timeout_sec=2.0)
        rclpy.try_shutdown()


# ---- the parent ---------------------------------------------------------------------------------
class Loopback:
    name = "loopback"

    def __init__(self, domain: int) -> None:
        self.domain = domain

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "FASTDDS_"))}
        env.update(ROS_DOMAIN_ID=str(self.domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   FASTDDS_BUILTIN_TRANSPORTS="UDPv4", RMW_IMPLEMENTATION="rmw_fastrtps_cpp")
        return env

    def command(self, _host: str, args: list[str]) -> list[str]:
        return args

    def down(self) -> None:
        pass


def start(topo, host: str, args: list[str], quiet: bool = True) -> subprocess.Popen:
    return subprocess.Popen(topo.command(host, args), env=topo.env(),
                            stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def stop(procs) -> None:
    from netns import stop_processes

    stop_processes(procs)


def run_child(topo, args: list[str], timeout: float = 900) -> dict:
    out = subprocess.run(topo.command("exec", [PY, str(Path(__file__)), *args]), env=topo.env(),
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(topo, arm_counts: list[int], executions: int, skew_runs: int) -> dict:
    res: dict = {"topology": topo.name}
    res["bare_cancel_round_trip_ms"] = stats_ms(bare(topo, 1, executions))
    res["arms"] = {}
    for n in arm_counts:
        procs = [start(topo, f"h{k}", [PY, "-m", "mj_manipulator_ros.ros.scripted_controller",
                                       "--action", f"/arm{k}_arm_controller/follow_joint_trajectory",
                                       "--behavior", "abort_after" if k == 0 else "never_finish",
                                       "--after", "0.05"]) for k in range(n)]
        try:
            time.sleep(2.0)
            r = run_child(topo, ["--child", "executor", "--arms", str(n), "--executions",
                                 str(executions)])
        finally:
            stop(procs)
        peer = stats_ms(r["peer_cancel"])
        fan = stats_ms(bare(topo, n - 1, max(10, executions // 2)))
        res["arms"][n] = {"peer_cancel_latency_ms": peer,
                          "bare_fanout_cancel_ms": fan,
                          "peer_cancel_over_bare_fanout_median": round(peer["median"] / fan["median"], 2),
                          "acceptance_latency_ms": stats_ms(r["accept"]),
                          "unexpected_outcomes": r["unexpected"],
                          "peer_cancel_over_bare_median": round(
                              peer["median"] / res["bare_cancel_round_trip_ms"]["median"], 2)}
    res["start_skew_ms"] = start_skew(topo, skew_runs)
    return res


def bare(topo, fanout: int, executions: int) -> list:
    """Cancel round trips of plain rclpy: one client (where the executor runs) canceling goals on
    ``fanout`` plain servers at once (each where an arm's controller runs)."""
    servers = [start(topo, f"h{k}", [PY, str(Path(__file__)), "--child", "bare-server", "--action",
                                     f"/bare{k}/follow_joint_trajectory"]) for k in range(fanout)]
    try:
        time.sleep(2.0)
        return run_child(topo, ["--child", "bare-client", "--executions", str(executions),
                                "--fanout", str(fanout)])["cancel_rtt"]
    finally:
        stop(servers)


def start_skew(topo, runs: int) -> dict:
    from mj_manipulator_ros.resources import config_file, share_dir

    tmp = Path(tempfile.mkdtemp(prefix="mjmr-multihost-"))
    cfg = config_file("sim_openarm.yaml")  # its arms start where the wave starts
    plan = share_dir() / "config/plans/openarm_wave.yaml"
    procs = [start(topo, f"h{k}", [str(Path(PY).with_name("mj-manipulator-ros")), "sim", "--config",
                                   str(cfg), "--serve", arm]) for k, arm in enumerate(("left", "right"))]
    skews, failed = [], 0
    try:
        time.sleep(4.0)
        for k in range(runs):
            r = subprocess.run(topo.command("exec", [PY, str(ROOT / "test" / "netns_driver.py"), "run",
                                                     "--config", str(cfg), "--plan", str(plan),
                                                     "--bag", str(tmp / f"bag{k}")]),
                               env=topo.env(), capture_output=True, text=True, timeout=120)
            doc = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
            late = doc.get("onset_lateness_s", {})
            status = doc.get("report", {}).get("status")
            if status is None or ExecutionStatus(status) is not ExecutionStatus.SUCCEEDED \
                    or len(late) != 2:
                failed += 1
                continue
            skews.append(max(late.values()) - min(late.values()))
    finally:
        stop(procs)
    return {**stats_ms(skews), "failed_runs": failed, "control_period_ms": 2.0}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--child", choices=["executor", "bare-client", "bare-server"])
    p.add_argument("--arms", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--executions", type=int, default=60)
    p.add_argument("--skew-runs", type=int, default=4)
    p.add_argument("--fanout", type=int, default=1)
    p.add_argument("--action", default="/bare0/follow_joint_trajectory")
    args = p.parse_args()
    if args.child == "executor":
        print(json.dumps(child_executor(args.arms[0], args.executions)))
        return
    if args.child == "bare-client":
        print(json.dumps(child_bare_client(args.executions, args.fanout)))
        return
    if args.child == "bare-server":
        child_bare_server(args.action)
        return
    from netns import Topology, can_make_namespaces

    domain = 120 + os.getpid() % 40
    results = [measure(Loopback(domain), args.arms, args.executions, args.skew_runs)]
    ok, why = can_make_namespaces()
    if ok:
        topo = Topology("mjbench", ["exec", *[f"h{k}" for k in range(max(args.arms))]], domain + 1)
        try:
            r = measure(topo, args.arms, args.executions, args.skew_runs)
            r["topology"] = "namespaces"
            results.append(r)
        finally:
            topo.down()
    else:
        results.append({"topology": "namespaces", "skipped": why})
    goal = all(a["peer_cancel_over_bare_median"] <= 1.5 for r in results if "arms" in r
               for a in r["arms"].values())
    print(json.dumps({"benchmark": "multihost", "cpus": os.cpu_count(), "results": results,
                      "goal": "peer-cancel median <= 1.5x the bare cancel round trip",
                      "meets_goal": goal}, indent=2))


if __name__ == "__main__":
    main()
