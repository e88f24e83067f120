"""Stops measured in the synchronous simulator against the stop envelope's predictions. Prints
JSON; not a test (``test/test_measured_stops.py`` runs a few of the same trials).

The shipped OpenArm pair and its crossing plan, with stop limits below its worst stop at full
speed (``LIMITS``) and the allowances for each controller kind's response (``ALLOWANCES``): the
plan as the gate fits it to the limits
(``check/stop_fit.fit_stop_limits``), then, per trial, seeded: a simulated controller kind
(``position``: MuJoCo's position servos; ``torque``: torque control of the joints; ``mit``: MIT
commands to the actuator twin, ``sim.physics: cosim``), a request plan time uniform over the
plan, and a stop: ``stop`` (an operator's stop or a pause not resumed: every arm's controlled
stop), ``failure`` (one arm, at random, fails and holds; its peers take the controlled stop) or
``cancel`` (every arm holds). Each run from the plan's start in a fresh simulation
(``sim/stop_trial.py``: the executor's own ramp, physics stepped synchronously), each arm's time
to rest and its hand's travel measured and compared with the envelope's prediction for that
request (``check/stop_envelope.predict``) and with the limits.

Per trial and arm: ``above``: a measured figure over its limit; ``off``: a measured figure
further from its prediction than ``TOLERANCE`` (10 %, or 20 ms / 5 mm, the larger); ``under``:
a measured figure over its prediction by more than that (the prediction was not a bound).

Calibration (``--calibrate``): the same trials with no allowance; the output's
``allowances_covering_these`` are the settles, lag and overtravel that cover every stop measured
(what ``ALLOWANCES`` was made from, on other seeds than the validation's).

Usage: python bench/measured_stops.py [--trials 1000] [--workers 2] [--seed 0] [--calibrate]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import time
from collections import Counter, defaultdict

import numpy as np

#: a measured figure agrees with its prediction within the larger of these
TOLERANCE = {"time": (0.10, 0.020), "distance": (0.10, 0.005)}
KINDS = ("position", "torque", "mit")
#: per controller kind, the stop limits (s, m): below the crossing plan's worst stop at full
#: speed (0.75 s, 142 mm); the position servos' settle (0.31 s after the reference stands)
#: leaves no controlled stop within 0.5 s at any speed (refused by name), so theirs is 0.8 s
LIMITS = {"position": (0.8, 0.1), "torque": (0.5, 0.1), "mit": (0.5, 0.1)}
#: the allowances for the torque controllers' response (``execution.stop_settle_s``, ...; no
#: shipped configuration runs them; the position servos' are ``config/sim_openarm.yaml``'s, the
#: twin's ``config/sim_openarm_twin.yaml``'s): ``--calibrate`` on 300 other trials (seed 1)
#: measured 0 / 0.141 s / 0 / 0.1 mm; set with a margin
ALLOWANCES = {"torque": {"stop_settle_s": 0.0, "hold_settle_s": 0.16, "tracking_lag_s": 0.005,
                         "stop_overtravel_m": 0.001}}
#: no allowance at all (``--calibrate``)
NONE = {"stop_settle_s": 0.0, "hold_settle_s": 0.0, "tracking_lag_s": 0.0,
        "stop_overtravel_m": 0.0}
#: the lags tried in calibration, s of plan time
LAGS = np.arange(0.0, 0.1001, 0.005)
STOPS = ("stop", "failure", "cancel")

_state: dict = {}


def setup(kind: str, limits: tuple[float, float], allowances: tuple | None = None):
    """(simulation config, executor config with the limits and ``allowances`` ((name, value)
    pairs; None: the configuration's own), the fitted plan, hand paths, bounds) for a
    controller kind; made once per process, kind, limits and allowances."""
    from mj_manipulator_ros.check.stop_envelope import HandPaths
    from mj_manipulator_ros.check.stop_fit import fit_stop_limits
    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.core.time_scaling import config_bounds
    from mj_manipulator_ros.model.scene import scene_for
    from mj_manipulator_ros.resources import config_file, share_dir
    from mj_manipulator_ros.sim.sim_config import ArmSimSettings, sim_config

    key = (kind, limits, allowances)
    if key not in _state:
        cfg = sim_config(load_config(config_file(
            "sim_openarm_twin.yaml" if kind == "mit" else "sim_openarm.yaml")))
        if kind == "torque":
            cfg = dataclasses.replace(cfg, sim=dataclasses.replace(
                cfg.sim, arms={a.name: ArmSimSettings(controller="torque")
                               for a in cfg.executor.arms}))
        ex = cfg.executor.with_execution(max_stop_time_s=limits[0], max_stop_distance_m=limits[1],
                                         **dict(allowances or ()))
        scene = scene_for(ex)
        plan = fit_stop_limits(load_plan(share_dir() / "config/plans/openarm_crossing.yaml"),
                               ex, scene).plan
        _state[key] = (cfg, ex, plan, HandPaths(plan, scene), config_bounds(plan, ex))
    return _state[key]


def allowances_for(kind: str) -> tuple | None:
    """``ALLOWANCES[kind]`` as ``setup`` takes it (None: the configuration's own)."""
    given = ALLOWANCES.get(kind)
    return None if given is None else tuple(sorted(given.items()))


def trial(args) -> list[dict]:
    """One seeded trial (``main``'s jobs): a row per arm."""
    index, seed, limits, allowances = args
    rng = np.random.default_rng([seed, index])
    kind = KINDS[int(rng.integers(len(KINDS)))]
    stop = STOPS[int(rng.integers(len(STOPS)))]
    failing = int(rng.integers(2))
    request = float(rng.uniform(0.0, 1.0))   # of the fitted plan's duration
    given = allowances.get(kind)
    return run_trial(kind, stop, failing, request, tuple(limits[kind]),
                     None if given is None else tuple(sorted(given.items())), index)


def run_trial(kind: str, stop: str, failing: int, at: float, limits: tuple,
              allowances: tuple | None = None, index: int = 0) -> list[dict]:
    """A stop of kind ``stop`` (STOPS; ``failing``: the index of the arm that fails) at the
    fraction ``at`` of the fitted plan's duration, controllers of ``kind``: a row per arm,
    measured and predicted."""
    from mj_manipulator_ros.check.stop_envelope import predict
    from mj_manipulator_ros.core.interpolation import sample
    from mj_manipulator_ros.sim.stop_trial import ArmStop, measure_stop

    cfg, ex, plan, paths, bounds = setup(kind, limits, allowances)
    failing = plan.arm_names[failing]
    request = at * plan.duration
    how = {a: ArmStop.HOLD if stop == "cancel" or (stop == "failure" and a == failing)
           else ArmStop.CONTROLLED for a in plan.arm_names}
    measured = measure_stop(cfg, plan, bounds, request, how, ex.execution.start_lead_s)
    env = predict(plan, ex, paths, requests=[request])
    rows = []
    for arm in plan.arm_names:
        m = measured[arm]
        s = ex.execution
        if m.how is ArmStop.HOLD or np.isnan(env.controlled_time[0]):
            t_pred, d_pred = env.hold_time, float(env.hold_travel[arm][0])
            t_ref = 0.0                                    # the allowance is the whole time
            end = min(request + s.hold_overshoot_s, plan.duration)
        else:
            t_pred, d_pred = float(env.controlled_time[0]), float(env.controlled_travel[arm][0])
            t_ref = t_pred - s.stop_settle_s               # the reference's own stop
            end = float(env.rest[0])
        # the reference path from each candidate lag before the request (calibration)
        covered = paths.between(arm, np.maximum(request - LAGS, 0.0), np.full(LAGS.size, end))
        if t_ref == 0.0:   # a hold's run-on is counted there and back
            covered = covered + paths.between(arm, np.array([request]), np.array([end]))[0]
        _, v, _ = sample(plan[arm], [request])
        t_max, d_max = ex.stop_limits(arm)
        rows.append({"trial": index, "kind": kind, "stop": stop, "arm": arm,
                     "how": m.how.value, "request": request,
                     "joint_speed": float(np.abs(v[0]).max()),
                     "time": m.time_s, "time_pred": t_pred, "time_limit": t_max,
                     "distance": m.hand_travel_m, "distance_pred": d_pred,
                     "distance_limit": d_max, "settled": bool(m.settled),
                     "settle_needed": m.time_s - t_ref, "covered": covered.tolist()})
    return rows


def judge(row: dict) -> dict:
    out = {}
    for fig in ("time", "distance"):
        value, pred, limit = row[fig], row[f"{fig}_pred"], row[f"{fig}_limit"]
        rel, absolute = TOLERANCE[fig]
        tol = max(rel * pred, absolute)
        out[f"{fig}_above"] = limit is not None and value > limit
        out[f"{fig}_off"] = abs(value - pred) > tol
        out[f"{fig}_under"] = value - pred > tol
    return out


def summarize(rows: list[dict]) -> dict:
    groups = defaultdict(list)
    for r in rows:
        groups[(r["kind"], r["how"])].append(r)
    out = {}
    for (kind, how), rs in sorted(groups.items()):
        verdicts = [judge(r) for r in rs]
        moving = [r for r in rs if r["joint_speed"] > 0.05]
        out[f"{kind}/{how}"] = {
            "arm_stops": len(rs), "moving": len(moving),
            **{k: sum(v[k] for v in verdicts) for k in verdicts[0]},
            # an arm that stands has nothing to predict: the accuracy of the moving ones
            **{f"{k}_moving": sum(judge(r)[k] for r in moving)
               for k in ("time_off", "distance_off")},
            "time_excess_s": _spread([r["time"] - r["time_pred"] for r in moving]),
            "distance_excess_mm": _spread([1e3 * (r["distance"] - r["distance_pred"])
                                          for r in moving]),
            "longest_time_s": max(r["time"] for r in rs),
            "farthest_mm": 1e3 * max(r["distance"] for r in rs),
            "unsettled": sum(not r["settled"] for r in rs),
            # what the allowances would have had to be to cover every one of these
            ("stop_settle_s" if how == "controlled" else "hold_settle_s"):
                round(max(r["settle_needed"] for r in rs), 4)}
    return out


def calibrate(rows: list[dict]) -> dict:
    """Per controller kind, the allowances that cover every measured stop of ``rows``: the
    settles (the largest measured past the reference's own stop; none below 0), and of the
    lags tried, the one whose overtravel (the largest travel left uncovered) leaves the least
    over-prediction on average."""
    out = {}
    for kind in sorted({r["kind"] for r in rows}):
        rs = [r for r in rows if r["kind"] == kind]
        ctl = [r["settle_needed"] for r in rs if r["how"] == "controlled"]
        hold = [r["settle_needed"] for r in rs if r["how"] == "hold"]
        covered = np.array([r["covered"] for r in rs])          # (N, lags)
        measured = np.array([r["distance"] for r in rs])
        over = np.maximum((measured[:, None] - covered).max(axis=0), 0.0)   # (lags,)
        waste = (covered + over[None, :] - measured[:, None]).mean(axis=0)
        k = int(np.argmin(waste))
        out[kind] = {"stop_settle_s": max(0.0, max(ctl, default=0.0)),
                     "hold_settle_s": max(0.0, max(hold, default=0.0)),
                     "tracking_lag_s": float(LAGS[k]), "stop_overtravel_m": float(over[k])}
    return out


def _spread(values) -> dict:
    if not values:
        return {}
    v = np.asarray(values)
    return {"min": round(float(v.min()), 4), "p50": round(float(np.median(v)), 4),
            "p99": round(float(np.percentile(v, 99)), 4), "max": round(float(v.max()), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limits", default=json.dumps(LIMITS),
                    help="per controller kind, [max_stop_time_s, max_stop_distance_m], JSON")
    ap.add_argument("--rows", help="also write every arm's row here (JSON lines)")
    ap.add_argument("--allowances", default=json.dumps(ALLOWANCES),
                    help="per controller kind, the execution's response allowances, JSON "
                         "(default: ALLOWANCES; a kind not named: its configuration's)")
    ap.add_argument("--calibrate", action="store_true",
                    help="measure with no allowance (the configuration's defaults): the "
                         "figures then say what the allowances must cover")
    args = ap.parse_args()
    limits = json.loads(args.limits)
    t0 = time.perf_counter()
    allowances = {k: NONE for k in KINDS} if args.calibrate else json.loads(args.allowances)
    jobs = [(i, args.seed, limits, allowances) for i in range(args.trials)]
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        rows = [r for rs in pool.imap_unordered(trial, jobs, chunksize=4) for r in rs]
    rows.sort(key=lambda r: (r["trial"], r["arm"]))
    if args.rows:
        with open(args.rows, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print(json.dumps({
        "conditions": f"{args.workers} worker processes on this machine, synchronous physics "
                      f"(figures are simulated time, independent of load); limits {limits}; "
                      f"seed {args.seed}; allowances {allowances}",
        "trials": args.trials, "wall_s": round(time.perf_counter() - t0, 1),
        "stops": dict(Counter(r["stop"] for r in rows[::2])),
        "summary": summarize(rows), "allowances_covering_these": calibrate(rows)}, indent=1))


if __name__ == "__main__":
    main()
