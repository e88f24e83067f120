"""From a combined goal's sending to motion, as MoveIt's execution manager sees it. Prints JSON;
not a test.

The simulated OpenArm pair (``config/sim_openarm.yaml`` on the system clock, real time) and the
execution node run as their own processes, started from the console scripts; this process is
the client and sends each plan as MoveIt does: one FollowJointTrajectory goal over every joint,
header stamp 0. Per goal:

- ``accepted_after``: sending to the goal's acceptance (the goal callback's checks);
- ``motion_after``: sending to the first joint state (by its stamp) where any joint has left
  the plan's start by more than ``ONSET_RAD``;
- ``start_seen_after``: ``motion_after`` less the plan's own time to leave its start by
  ``ONSET_RAD`` (a plan starting from rest takes a while to move a milliradian): when the
  joints show the plan began, counted from sending (the start stamp as the arms carry it out,
  their tracking lag included);
- ``result_after``: sending to the result;
- ``slack``: MoveIt's default bound minus ``result_after``; the bound is ``duration x 1.2 +
  0.5 s`` counted from sending (trajectory_execution_manager's
  ``allowed_execution_duration_scaling`` and ``allowed_goal_duration_margin``). The client
  watches each goal as MoveIt does (``ros/moveit_monitor.py``): past the bound it cancels it
  (``timed_out``);
- the node's own account of the time to the stamp (the result's ``error_string``).

Each goal is a new plan to the pre-flight gate (its interior waypoints moved by 1e-9 rad per
goal, start and end exact), as MoveIt's plans are; ``--cached`` sends the same plan each time.
The first goal is sent ``READY_S`` after the node's action server is there and the simulator's
joint states flow (the node's clock-offset window filled, as for any goal a while after
start-up); it is also the node's first, with nothing measured for its start lead
(``start_lead_s``, 0.25 s): ``later_goals`` are the others.

Medians and 99th percentiles (nearest rank: of 100 goals or fewer, the largest); with
``--busy N``, N busy loops (``python3 -c 'while True: pass'``) run beside it, killed at the end.

Usage: python bench/goal_latency.py [--goals 3] [--plans wave,crossing] [--cached] [--busy N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
#: a joint farther than this from the plan's start has moved (rad)
ONSET_RAD = 1e-3
#: after the execution node's action server appears and the simulator's joint states flow,
#: the client waits this long before its first goal (s): the node's clock-offset window (1 s of
#: joint-state stamps) fills first
READY_S = 2.0


def _config(folder: Path) -> Path:
    from mj_manipulator_ros.resources import config_file

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["sim"].update(use_sim_time=False, real_time_factor=1.0)
    path = folder / "goal_latency.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _plans(names: list[str]) -> dict:
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.resources import share_dir

    return {n: load_plan(share_dir() / f"config/plans/openarm_{n}.yaml") for n in names}


def _nudged(plan, k: int):
    """The plan with its interior waypoints moved by k x 1e-9 rad: a new plan to the gate's
    verdict cache, the same motion."""
    from mj_manipulator_ros.core.plan import MultiArmPlan

    arms = {}
    for a, t in plan.arms.items():
        p = t.positions.copy()
        p[1:-1] += k * 1e-9
        arms[a] = dataclasses.replace(t, positions=p)
    return MultiArmPlan(arms)


def run(goals: int, names: list[str], cached: bool) -> dict:
    import rclpy
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from mj_manipulator_ros.apps.demo import COMBINED_ACTION, combined_trajectory
    # MoveIt's trajectory_execution_manager with its defaults: the bound from sending, a cancel
    # past it
    from mj_manipulator_ros.ros.moveit_monitor import (MOVEIT_MARGIN_S, MOVEIT_SCALING,
                                                        send_monitored)

    out: dict = {"conditions": (f"{os.cpu_count()} cores, simulator and execution node as "
                                "processes, loopback DDS, system clock, real time; "
                                + ("the same plan each goal (gate verdict cached)" if cached
                                   else "a new plan each goal (gate runs each time)")),
                 "plans": {}}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _config(Path(tmp))
        env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
               "ROS_DOMAIN_ID": str(50 + os.getpid() % 40)}
        os.environ.update(env)
        cli = [sys.executable, "-m", "mj_manipulator_ros.cli"]
        procs = [subprocess.Popen([*cli, "sim", "--config", str(cfg)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                 subprocess.Popen([*cli, "execution-node", "--config", str(cfg)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        context = rclpy.context.Context()
        rclpy.init(context=context)
        try:
            node = rclpy.create_node("goal_latency_client", context=context)
            client = ActionClient(node, FollowJointTrajectory, COMBINED_ACTION)
            states: list[tuple[float, dict]] = []
            node.create_subscription(JointState, "/joint_states", lambda m: states.append(
                (m.header.stamp.sec + m.header.stamp.nanosec * 1e-9,
                 dict(zip(m.name, m.position)))), 100)
            spin = SingleThreadedExecutor(context=context)
            spin.add_node(node)
            if not client.wait_for_server(timeout_sec=120.0):
                raise SystemExit("the execution node did not come up within 120 s")
            # a MoveIt user's first goal comes a while after the robot is up: the node's
            # joint-state window (the clock offsets: 1 s of stamps) is filled first
            deadline = time.monotonic() + 120.0
            while not states and time.monotonic() < deadline:
                spin.spin_once(timeout_sec=0.05)
            ready = time.monotonic() + READY_S
            while time.monotonic() < ready:
                spin.spin_once(timeout_sec=0.05)
            for name, plan in _plans(names).items():
                rows = []
                start = {j: q for t in plan.arms.values() for j, q in zip(t.joint_names,
                                                                          t.positions[0])}
                own = _own_onset(plan)
                for k in range(goals):
                    _settle(spin, states, start)
                    sent_plan = plan if cached else _nudged(plan, k + 1)
                    goal = FollowJointTrajectory.Goal(trajectory=combined_trajectory(sent_plan))
                    states.clear()
                    sent = time.time()   # the joint states' stamps are on this clock
                    watched = send_monitored(client, spin, goal, plan.duration, 120.0)
                    if not watched.accepted or watched.result_after_s is None:
                        rows.append({"rejected": True, "said": watched.error_string})
                        continue
                    onset = next((t for t, q in states if any(
                        abs(q.get(j, v) - v) > ONSET_RAD for j, v in start.items())), None)
                    text = watched.error_string
                    parts = dict((p.strip().rsplit(" ", 1)[0], float(p.strip().rsplit(" ", 1)[1]))
                                 for p in re.sub(r"^.*?\(|\s*s\)$", "", text).split(",")) \
                        if watched.succeeded else {}
                    rows.append({"accepted_after": watched.accepted_after_s,
                                 "motion_after": None if onset is None else onset - sent,
                                 "start_seen_after": None if onset is None else
                                 onset - sent - own,
                                 "result_after": watched.result_after_s,
                                 "slack": watched.slack_s, "timed_out": watched.timed_out,
                                 "succeeded": watched.succeeded, "node_says": text,
                                 "parts": parts})
                ok = [r for r in rows if not r.get("rejected")]
                summary = {k: _stats([r[k] for r in ok if r[k] is not None])
                           for k in ("accepted_after", "motion_after", "start_seen_after",
                                     "result_after", "slack")}
                out["plans"][name] = {
                    "points": int(next(iter(plan.arms.values())).times.size),
                    "own_onset_s": round(own, 3),
                    "duration_s": plan.duration, "moveit_bound_s": round(
                        plan.duration * MOVEIT_SCALING + MOVEIT_MARGIN_S, 3),
                    "moveit_settings": {"allowed_execution_duration_scaling": MOVEIT_SCALING,
                                        "allowed_goal_duration_margin": MOVEIT_MARGIN_S},
                    "goals": goals, "rejected": len(rows) - len(ok),
                    "timed_out": sum(r["timed_out"] for r in ok),
                    "not_succeeded": sum(not r["succeeded"] for r in ok), **summary,
                    # the first goal after the node's start has nothing measured yet (its start
                    # lead is start_lead_s: core/start_lead.py); the later ones, apart
                    "later_goals": {k: _stats([r[k] for r in ok[1:] if r[k] is not None])
                                    for k in ("accepted_after", "start_seen_after")},
                    "start_seen_each": [None if r["start_seen_after"] is None
                                        else round(r["start_seen_after"], 3) for r in ok],
                    "parts_median_s": {p: round(float(np.median([r["parts"][p] for r in ok
                                                                  if p in r["parts"]])), 3)
                                       for p in (ok[-1]["parts"] if ok else {})},
                    "example": ok[0]["node_says"] if ok else None}
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)
            for p in procs:
                p.send_signal(2)
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
    return out


def _settle(spin, states: list, start: dict, timeout: float = 30.0) -> None:
    """Spin until the latest joint state has every joint within 0.005 rad of ``start``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        spin.spin_once(timeout_sec=0.05)
        if states and all(abs(states[-1][1].get(j, np.inf) - v) < 0.005 for j, v in start.items()):
            time.sleep(0.3)   # the execution node's start tolerance, settled
            return
    raise SystemExit("the arms did not come back to the plan's start within 30 s")


def _own_onset(plan) -> float:
    """The plan's own time (s) until any joint is ``ONSET_RAD`` from its start (sampled every
    ms)."""
    from mj_manipulator_ros.core.interpolation import sample

    t = np.arange(0.0, plan.duration, 1e-3)
    moved = np.zeros(t.size, dtype=bool)
    for traj in plan.arms.values():
        p, _, _ = sample(traj, t)
        moved |= (np.abs(p - traj.positions[0]) > ONSET_RAD).any(axis=1)
    return float(t[np.argmax(moved)]) if moved.any() else 0.0


def _stats(values) -> dict:
    v = np.sort(np.asarray(values, dtype=float))
    if not v.size:
        return {"n": 0}
    # the 99th percentile by nearest rank: of 100 goals or fewer, the largest
    p99 = v[int(np.ceil(0.99 * v.size)) - 1]
    return {"n": int(v.size), "median": round(float(np.median(v)), 3),
            "p99": round(float(p99), 3), "min": round(float(v[0]), 3),
            "max": round(float(v[-1]), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", type=int, default=3)
    parser.add_argument("--plans", default="wave,crossing")
    parser.add_argument("--cached", action="store_true")
    parser.add_argument("--busy", type=int, default=0, help="busy loops beside the run")
    args = parser.parse_args()
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(args.busy)]
    try:
        out = run(args.goals, args.plans.split(","), args.cached)
    finally:
        for p in loops:
            p.kill()
            p.wait(timeout=10)
    out["busy_loops"] = args.busy
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
