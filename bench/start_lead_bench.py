"""The measured start lead beside busy loops. Prints JSON; not a test (no thresholds asserted).

The simulated OpenArm pair (``config/sim_openarm.yaml``) runs as its own process, as on a robot;
this process runs the executor. Beside ``--busy`` busy loops (``python3 -c 'while True: pass'``,
killed at the end), the wave plan is executed ``--runs`` times in each of two modes, interleaved
run by run in the same session:

- ``measured``: the lead raised by the machine's delivery jitter (core/start_lead.py; the
  default, ``max_start_lead_s`` 1.0 s);
- ``fixed``: ``max_start_lead_s: 0``, the configured ``start_lead_s`` (0.25 s) always: the
  baseline.

Per mode: runs, how each ended (first failure reasons counted), ``late_acceptance`` count, the
lead used (median, max), the smallest margin between an arm's acceptance and the stamp, and how
many runs first moved the arms back to the plan's start (``execute(approach=True)``: a run that
stopped mid-plan leaves them elsewhere).

Usage: python bench/start_lead_bench.py [--runs 50] [--busy 2]
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
from mj_manipulator_ros.core.plan_io import load_plan  # noqa: E402
from mj_manipulator_ros.model.limits import load_config_with_model  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--busy", type=int, default=2)
    args = ap.parse_args()
    config_path = ROOT / "config" / "sim_openarm.yaml"
    config = load_config_with_model(config_path)
    plan = load_plan(ROOT / "config" / "plans" / "openarm_wave.yaml")
    modes = {"measured": config, "fixed": config.with_execution(max_start_lead_s=0.0)}
    sim = subprocess.Popen([sys.executable, "-m", "mj_manipulator_ros.cli", "sim", "--config",
                            str(config_path)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    rows = {m: [] for m in modes}
    started = time.monotonic()
    try:
        with RosContext() as ros:
            executors = {m: MultiArmExecutor(c, context=ros.context, preflight=preflight_for(c))
                         for m, c in modes.items()}
            try:
                for ex in executors.values():
                    ex.check(plan)
                for run in range(args.runs):
                    for mode, ex in executors.items():
                        # a run that stopped mid-plan leaves the arms off the start: the next
                        # one moves them back first (counted), never a crash of the bench
                        try:
                            report = ex.execute(plan, checked=True, approach=True)
                        except MjManipulatorError as exc:
                            rows[mode].append({"status": "refused", "failure": type(exc).__name__,
                                               "lead": None, "margin": None, "approached": False})
                            print(f"run {run} {mode}: refused: {exc}", file=sys.stderr)
                            continue
                        f = report.first_failure
                        margins = [report.start_stamp - r.accepted_at for r in report.arms.values()
                                   if r.accepted_at is not None and report.start_stamp]
                        rows[mode].append({
                            "status": report.status.value,
                            "failure": None if f is None else f.reason.value,
                            "lead": None if report.start_lead is None
                            else report.start_lead["seconds"],
                            "margin": min(margins) if margins else None,
                            "approached": ex.last_approach_report is not None})
                        print(f"run {run} {mode}: {report.status.value}"
                              f"{'' if f is None else ' ' + f.reason.value}", file=sys.stderr)
            finally:
                for ex in executors.values():
                    ex.close()
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
                          "runs_per_mode": args.runs, "plan": "openarm_wave (6 s)",
                          "simulator": "separate process, system clock, real time",
                          "seconds": round(time.monotonic() - started, 1)}}
    for mode, rs in rows.items():
        leads = [r["lead"] for r in rs if r["lead"] is not None]
        margins = [r["margin"] for r in rs if r["margin"] is not None]
        out[mode] = {
            "runs": len(rs),
            "outcomes": dict(collections.Counter(r["failure"] or r["status"] for r in rs)),
            "late_acceptance": sum(r["failure"] == "late_acceptance" for r in rs),
            "moved_back_to_the_start_first": sum(r["approached"] for r in rs),
            "lead_s": {"median": round(float(np.median(leads)), 4),
                       "max": round(float(max(leads)), 4)} if leads else None,
            "min_margin_ms": round(1e3 * min(margins), 1) if margins else None}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
