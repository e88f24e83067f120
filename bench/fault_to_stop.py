"""From a fault's first evidence to the peers stopping: the executor's reaction, measured on the
simulator. Prints JSON; not a test.

The tiny arms (2 and 4 of them, ``test/tiny_arm.py``), the simulator at real time on the wall
clock (sim time would count in its control cycles, 4 ms), the executor's controlled peer stop (the default). Per
execution one arm (the first) fails at a random moment of a 3 s swing of every arm, by class:

- ``abort``: its controller aborts its goal (``abort_after_s``); the evidence is the failed
  result, read by the arm's thread;
- ``behind``: its controller stops following (``freeze``: the reference stops where the arm
  is, the plan moves on); the evidence is the joint-state message that crossed the watch's
  bound, at its receipt: the progress skew (``max_progress_skew_s``) before the path tolerance
  (``path_tolerance_rad``), as the watch finds it;
- ``stale``: its joint states stop (``joint_state_gap_s``); the evidence is the moment they
  became stale (the last receipt plus ``joint_state_timeout_s``): the freshness check runs every
  ``WATCH_TICK_S``, so this class's figure includes up to one tick;
- ``gone``: its controller's action server is destroyed mid-goal (the simulator serves the arm
  no more: a new simulator per execution); the evidence is the moment the bench destroyed it
  (the executor's arm thread finds the server gone from the graph at its next look, every
  ``CHECK_PERIOD_S``; ``controller_gone`` cancels every arm).

Each execution's report carries the evidence (``first_failure.evidence_at``, the executor's
clock); the peers' stop goals sent are read from the run's arms (``ArmRun.sent``; where the
failure cancels every arm, a stale stream, their cancel requests), their rest from the stop
meter (the stop's request plus each peer's measured ``stop_time_s``). Figures per
class and arm count: evidence -> every peer's stop goal sent, evidence -> every peer at rest;
p50, p99, max (ms). The goal (issue 43): p99 under 10 ms to the stop goals sent, 2 arms, idle.

Usage: python bench/fault_to_stop.py [--runs 20] [--arms 2 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402

from mj_manipulator_ros.core.approach import approach_plan  # noqa: E402
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402
from mj_manipulator_ros.sim.sim_node import SimNode  # noqa: E402
from tiny_arm import tiny_config  # noqa: E402

#: class -> the failure reasons that are its evidence (an arm whose controller stops following
#: falls behind the others before it is 0.1 rad off: the progress skew trips first)
CLASSES = {"abort": ("aborted",), "behind": ("progress_skew", "tracking_error"),
           "stale": ("joint_states_stale",), "gone": ("controller_gone",)}
DURATION_S = 3.0
NAMES = ("a", "b", "c", "d")


def swing(arms) -> MultiArmPlan:
    t = np.linspace(0.0, DURATION_S, 61)
    s = np.sin(np.pi * t / DURATION_S) ** 2
    ds = (np.pi / DURATION_S) * np.sin(2 * np.pi * t / DURATION_S)
    ds[-1] = 0.0
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.outer(s, [0.6, 0.5]),
                                          np.outer(ds, [0.6, 0.5])) for a in arms})


def inject(sim: SimNode, kind: str, arm: str, at: float) -> None:
    """The fault of ``kind`` on ``arm``, ``at`` s into its goal (abort) or from now (others)."""
    if kind == "gone":
        sim.arms[arm].destroy()
    elif kind == "abort":
        sim.set_faults(arm, abort_after_s=at)
    elif kind == "stale":
        now = sim.shared.snapshot().sim_time
        sim.set_faults(arm, joint_state_gap_s=0.6, joint_state_gap_at_s=now + at)
    else:   # behind
        sim.set_faults(arm, freeze=True)


def clear(sim: SimNode, arm: str) -> None:
    sim.set_faults(arm, abort_after_s=None, freeze=False, joint_state_gap_s=0.0,
                   joint_state_gap_at_s=0.0)


def one(ex: MultiArmExecutor, sim: SimNode, plan: MultiArmPlan, kind: str, rng) -> dict:
    """One execution (from the plan's start: the arms are first moved there), the fault
    injected once its goals are stamped, ``at`` s into the motion."""
    import threading

    failing = plan.arm_names[0]
    at = float(rng.uniform(0.6, 2.0))
    gone_at: list[float] = []     # when the fault was injected (the gone class's evidence)

    def later():
        deadline = time.monotonic() + 30.0
        while ex.current_stamp is None and time.monotonic() < deadline:
            time.sleep(0.002)
        if ex.current_stamp is None:
            return
        if kind == "abort":   # counted from the goal's start: set at once
            inject(sim, kind, failing, at)
            return
        time.sleep(max(0.0, ex.current_stamp.seconds - ex.now()) + at)
        gone_at.append(ex.now())
        inject(sim, kind, failing, 0.0)

    # the arms back at the plan's start first (a move of its own, before any fault)
    here = ex.start_check.measured(list(plan.arm_names))
    start = {a: plan[a].positions[0] for a in plan.arm_names}
    if max(float(np.max(np.abs(here[a] - start[a]))) for a in plan.arm_names) > 1e-3:
        moved = ex.execute(approach_plan(ex.config, here, start, 0.5, 0.5))
        assert moved.succeeded, moved.summary()
    t = threading.Thread(target=later, daemon=True)
    t.start()
    report = ex.execute(plan)
    t.join(35.0)
    if kind != "gone":
        clear(sim, failing)
    f = report.first_failure
    out = {"kind": kind, "reason": None if f is None else f.reason.value}
    if f is None or f.reason.value not in CLASSES[kind] or \
            (gone_at if kind == "gone" else f.evidence_at) in (None, []):
        return out
    evidence = gone_at[0] if kind == "gone" else f.evidence_at
    peers = [a for a in plan.arm_names if a != f.arm]
    sent = []
    for a in peers:   # its stop goal, or its cancel (a stale stream cancels every arm)
        times = [s for s, _g in ex.last_run.arms[a].sent if s >= evidence - 1e-3]
        cancel = report.arms[a].cancel_requested_at
        if cancel is not None and cancel >= evidence - 1e-3:
            times.append(cancel)
        sent.append(min(times) if times else np.nan)
    stop = report.stops[-1] if report.stops else None
    rest = []
    for a in peers:   # the stop meter counts from the stop's request (a cancel's, or the ramp's)
        r = report.arms[a]
        asked = stop.requested_at if stop is not None else r.cancel_requested_at
        rest.append(asked + r.stop_time_s if asked is not None and r.stop_time_s is not None
                    else np.nan)
    out.update(to_sent=float(np.max(sent)) - evidence,
               to_rest=float(np.max(rest)) - evidence)
    return out


def wait_ready(ex: MultiArmExecutor, since: float, timeout: float = 30.0) -> None:
    """Until every arm's server is there again and every joint reported after ``since`` (the
    executor's clock: a new simulator's states, not the last ones of the one before), bounded."""
    joints = [j for a in ex.config.arms for j in a.joint_names]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (
            ex.readiness() is None
            or min(ex.monitor.received(joints).values(), default=0.0) <= since):
        time.sleep(0.05)


def spread(values) -> dict:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)]) * 1e3
    if not v.size:
        return {}
    return {"n": int(v.size), "p50_ms": round(float(np.median(v)), 2),
            "p99_ms": round(float(np.percentile(v, 99)), 2), "max_ms": round(float(v.max()), 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--arms", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", nargs="+", default=list(CLASSES), choices=list(CLASSES),
                    help="in this order (gone: last; each of its executions restarts the "
                         "simulator)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    out = {"conditions": "this machine, simulator at real time (wall clock), loopback DDS; "
                         f"{args.runs} executions per class and arm count"}
    ros = RosContext()
    try:
        for n in args.arms:
            arms = NAMES[:n]
            with tempfile.TemporaryDirectory() as tmp:
                # the wall clock (the sim's would count in its control cycles)
                cfg = tiny_config(Path(tmp), arms=arms, sim={"real_time_factor": 1.0,
                                                             "use_sim_time": False})
                sim = SimNode(cfg, context=ros.context).start()
                try:
                    with MultiArmExecutor(cfg.executor, context=ros.context) as ex:
                        plan = swing(arms)
                        for kind in args.classes:
                            rows = []
                            for _ in range(args.runs):
                                if kind == "gone":   # the last one served an arm no more
                                    sim.close()
                                    since = ex.now()
                                    sim = SimNode(cfg, context=ros.context).start()
                                    wait_ready(ex, since)
                                rows.append(one(ex, sim, plan, kind, rng))
                            wrong = [r["reason"] for r in rows if "to_sent" not in r]
                            out[f"{n}_arms/{kind}"] = {
                                "evidence_to_stop_goals_sent": spread(r.get("to_sent")
                                                                      for r in rows),
                                "evidence_to_peers_at_rest": spread(r.get("to_rest")
                                                                    for r in rows),
                                "not_this_class": wrong}

                finally:
                    sim.close()
    finally:
        ros.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
