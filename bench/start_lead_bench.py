"""The start lead on a loaded machine. Prints JSON; not a test (no thresholds asserted).

The simulated OpenArm pair (``config/sim_openarm.yaml``) runs as its own process, as on a robot;
this process runs the executor (as ``execute`` does: start-up objects frozen,
``core/heap.py``). The wave plan is executed ``--idle-runs`` times on the idle machine (the
baseline, same session), then ``--runs`` times beside ``--busy`` busy loops
(``python3 -c 'while True: pass'``, killed at the end), one executor for all: its first
goal gets ``start_lead_s`` (0.25 s), every later one the measured need
(``core/start_lead.py``), measured before the load and then beside it.

Per phase: runs, how each ended (first failure reasons counted), ``late_acceptance`` count,
how many runs first moved the arms back to the plan's start (``execute(approach=True)``: a run
that stopped mid-plan leaves them elsewhere), and per arm and run, relative to the start
stamp: when the goal was sent, when the controller took it (its acceptance stamp) and when
its answer was read here (median, latest); the smallest margin between a read and the stamp;
and the loaded phase's acceptance latency (sent to read) as a ratio to the idle one.

Usage: python bench/start_lead_bench.py [--runs 50] [--idle-runs 10] [--busy 2]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("ROS_DOMAIN_ID", str(120 + os.getpid() % 30))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402

from mj_manipulator_ros.check.preflight import preflight_for  # noqa: E402
from mj_manipulator_ros.core.errors import MjManipulatorError  # noqa: E402
from mj_manipulator_ros.core.heap import freeze_startup  # noqa: E402
from mj_manipulator_ros.core.plan_io import load_plan  # noqa: E402
from mj_manipulator_ros.core.sync import FailureReason  # noqa: E402
from mj_manipulator_ros.model.limits import load_config_with_model  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402

TIMES = (("goal_sent_at", "sent"), ("taken_at", "taken"), ("accepted_at", "read"))


def one_run(ex: MultiArmExecutor, plan, label: str) -> dict:
    """One execution; its outcome and each arm's times relative to the stamp, ms."""
    try:
        report = ex.execute(plan, checked=True, approach=True)
    except MjManipulatorError as exc:
        print(f"{label}: refused: {exc}", file=sys.stderr)
        return {"outcome": f"refused ({type(exc).__name__})", "times_ms": {}, "approached": False}
    stamp, f = report.start_stamp, report.first_failure
    times = {a: {name: None if getattr(r, key) is None or not stamp
                 else round(1e3 * (getattr(r, key) - stamp), 2) for key, name in TIMES}
             for a, r in report.arms.items()}
    outcome = report.status.value if f is None else f.reason.value
    print(f"{label}: {outcome} {json.dumps(times)}", file=sys.stderr)
    return {"outcome": outcome, "times_ms": times,
            "lead_ms": None if report.start_lead_s is None else round(1e3 * report.start_lead_s, 1),
            "late": f is not None and f.reason is FailureReason.LATE_ACCEPTANCE,
            "approached": ex.last_approach_report is not None}


def summary(rows: list[dict]) -> dict:
    def stat(name: str):
        xs = [t[name] for r in rows for t in r["times_ms"].values() if t[name] is not None]
        return {"n": len(xs), "median": round(float(np.median(xs)), 1),
                "latest": round(float(max(xs)), 1)} if xs else None
    latency = [t["read"] - t["sent"] for r in rows for t in r["times_ms"].values()
               if t["read"] is not None and t["sent"] is not None]
    reads = [t["read"] for r in rows for t in r["times_ms"].values() if t["read"] is not None]
    leads = [r["lead_ms"] for r in rows if r.get("lead_ms") is not None]
    return {"runs": len(rows),
            "lead_ms": {"median": float(np.median(leads)), "min": min(leads),
                        "max": max(leads)} if leads else None,
            "outcomes": dict(collections.Counter(r["outcome"] for r in rows)),
            "late_acceptance": sum(r.get("late", False) for r in rows),
            "moved_back_to_the_start_first": sum(r["approached"] for r in rows),
            **{f"{name}_after_stamp_ms": stat(name) for _, name in TIMES},
            "min_margin_ms": round(-max(reads), 1) if reads else None,
            "acceptance_latency_ms": {"median": round(float(np.median(latency)), 1),
                                      "max": round(float(max(latency)), 1)} if latency else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--idle-runs", type=int, default=10)
    ap.add_argument("--busy", type=int, default=2)
    args = ap.parse_args()
    config_path = ROOT / "config" / "sim_openarm.yaml"
    config = load_config_with_model(config_path)
    plan = load_plan(ROOT / "config" / "plans" / "openarm_wave.yaml")
    sim = subprocess.Popen([sys.executable, "-m", "mj_manipulator_ros.cli", "sim", "--config",
                            str(config_path)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    busy: list[subprocess.Popen] = []
    phases: dict[str, list[dict]] = {"idle": [], "loaded": []}
    started = time.monotonic()
    try:
        with RosContext() as ros:
            with MultiArmExecutor(config, context=ros.context,
                                  preflight=preflight_for(config)) as ex:
                ex.check(plan)
                freeze_startup()
                for run in range(args.idle_runs):
                    phases["idle"].append(one_run(ex, plan, f"idle run {run}"))
                busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range(args.busy)]
                for run in range(args.runs):
                    phases["loaded"].append(one_run(ex, plan, f"loaded run {run}"))
    finally:
        for p in busy:
            p.kill()
            p.wait(10)
        sim.terminate()
        try:
            sim.wait(20)
        except subprocess.TimeoutExpired:
            sim.kill()
            sim.wait(10)
    out = {"conditions": {"cores": os.cpu_count(), "busy_loops": args.busy,
                          "start_lead_s": config.execution.start_lead_s,
                          "plan": "openarm_wave (6 s)",
                          "simulator": "separate process, system clock, real time",
                          "seconds": round(time.monotonic() - started, 1)},
           **{phase: summary(rows) for phase, rows in phases.items()}}
    idle, loaded = out["idle"]["acceptance_latency_ms"], out["loaded"]["acceptance_latency_ms"]
    if idle and loaded:
        out["loaded_over_idle_acceptance_latency"] = {
            k: round(loaded[k] / idle[k], 2) for k in ("median", "max")}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
