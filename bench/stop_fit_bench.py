"""What enforcing stop limits costs the pre-flight gate. Prints JSON; not a test.

On the OpenArm pair (``config/openarm_bimanual.yaml``), per shipped plan, best of ``--repeats``,
one core (run it pinned: ``taskset -c 0``), in one run:

- ``gate_s``: the gate without limits: validation, then the synchronized replay and the stop
  band (``PreflightCheck``, a fresh one per repeat: no verdict kept);
- ``gate_with_limits_s``: with ``max_stop_time_s`` and ``max_stop_distance_m`` set (default
  0.5 s and 0.1 m: below the crossing plan's worst stop): validation, the stop fit
  (``check/stop_fit.fit_stop_limits``), then the replay and band of the plan as it will run
  (slowed where a stop would pass a limit);
- ``fit_s``: the stop fit alone; ``ratio``: ``gate_with_limits_s / gate_s`` (the target is 2);
- what the fit did: the plan's duration before and after, its longest stop before and after,
  the rounds of prediction on the slowed plan.

Usage: taskset -c 0 python bench/stop_fit_bench.py [--repeats 5] [--time 0.5] [--distance 0.1]
"""

from __future__ import annotations

import argparse
import json
import time

import mj_manipulator_ros.check.stop_fit as envelope
from mj_manipulator_ros.check.preflight import preflight_for
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.resources import config_file, share_dir

PLANS = ("openarm_crossing", "openarm_wave")


def gate_once(config, name: str) -> tuple[float, float, object]:
    """(whole gate s, the fit's share s, the fit) with a fresh gate and a fresh plan object
    (both made before the clock: a plan keeps its stops once computed, core/stop_ends.py)."""
    plan = load_plan(share_dir() / f"config/plans/{name}.yaml")
    gate = preflight_for(config)
    t0 = time.perf_counter()
    validate_plan(plan, config)
    fit = gate.fit_stop_limits(plan)
    t1 = time.perf_counter()
    gate(fit.plan)
    return time.perf_counter() - t0, t1 - t0, fit


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--time", type=float, default=0.5)
    ap.add_argument("--distance", type=float, default=0.1)
    args = ap.parse_args()
    config = load_config_with_model(config_file("openarm_bimanual.yaml"))
    limited = config.with_execution(max_stop_time_s=args.time, max_stop_distance_m=args.distance)
    rounds = []
    predict = envelope.predict

    def counted(plan, config, paths, *a, original=None, **k):
        if original is not None:
            rounds[-1] += 1
        return predict(plan, config, paths, *a, original=original, **k)

    envelope.predict = counted
    out = {"conditions": "one core (run pinned), this machine, idle; best of "
                         f"{args.repeats}; limits {args.time} s / {args.distance} m",
           "fit_margin": envelope.FIT_MARGIN}
    for name in PLANS:
        off = min(gate_once(config, name)[0] for _ in range(args.repeats))
        best, fit_s, fit = float("inf"), float("inf"), None
        for _ in range(args.repeats):
            rounds.append(0)
            whole, share, fit = gate_once(limited, name)
            best, fit_s = min(best, whole), min(fit_s, share)
        out[name] = {"gate_s": round(off, 4), "gate_with_limits_s": round(best, 4),
                     "fit_s": round(fit_s, 4), "ratio": round(best / off, 3),
                     "duration_s": [round(fit.duration_before, 3),
                                    round(fit.duration_after, 3)],
                     "longest_stop_s": [round(fit.worst_before["stop_time_s"], 4),
                                        round(fit.worst_after["stop_time_s"], 4)]
                     if fit.worst_before else None,
                     "rounds": rounds[-1], "summary": fit.summary()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
