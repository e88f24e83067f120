"""Controlled stops on the simulated OpenArm pair. Prints JSON; not a test.

1. ``predicted``: for both shipped plans at full speed, the controlled stop asked at every
   0.05 s of plan time (``check/stop_distances.py``): the longest stop time, the largest joint
   travel and each hand's largest travel until rest.
2. ``measured``: the crossing plan's stop from full speed at plan time 8.0 s (its fastest
   stretch), run ``--runs`` times in fresh processes (``test/openarm_stop_driver.py``: simulator
   and executor in one process, real DDS, start lead 0.5 s): the cycle at which each arm's
   reference came to rest (the arms' skew), the stop time from the request, the ramp, the time
   spent computing it, each hand's travel from the request until rest (forward kinematics of
   the recorded reference), against the prediction for the same request.

3. ``hold``: a cancel of every arm at 6 plan times of the crossing plan in each simulated
   controller kind (``sim/hold_overshoot.py``: synchronous physics, the cancel taken at the
   next control cycle): how far past the request's plan time each arm came to rest, against
   ``execution.hold_overshoot_s`` (the pre-flight gate's assumption); and the stop band the
   gate computes for each shipped plan (``check/failure_band.py``).

Usage: python bench/stop_bench.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import mujoco
import numpy as np

from mj_manipulator_ros.check.stop_distances import stop_profile
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.report import ExecutionReport
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file, share_dir

DRIVER = Path(__file__).resolve().parents[1] / "test" / "openarm_stop_driver.py"


def predicted(config, scene) -> dict:
    out = {}
    for name in ("openarm_crossing", "openarm_wave"):
        profile = stop_profile(load_plan(share_dir() / f"config/plans/{name}.yaml"), config,
                               scene)
        out[name] = profile.worst()
    return out


def hand_travel(scene, arm: str, q: np.ndarray) -> float:
    """Path length (m) of the arm's hand (its last joint's body) over the references q (M, J)."""
    model = scene.model
    data = mujoco.MjData(model)
    b = scene.arms[arm]
    body = int(model.jnt_bodyid[b.joint_ids[-1]])
    xyz = np.empty((len(q), 3))
    for i, row in enumerate(q):
        data.qpos[b.qpos_adr] = row
        mujoco.mj_kinematics(model, data)
        xyz[i] = data.xpos[body]
    return float(np.linalg.norm(np.diff(xyz, axis=0), axis=1).sum())


def measured(config, scene, runs: int) -> list:
    rows = []
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            done = subprocess.run([sys.executable, str(DRIVER), "stop", str(out)],
                                  capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                rows.append({"error": done.stderr[-500:]})
                continue
            report = ExecutionReport.from_dict(json.loads((out / "report.json").read_text()))
            data = np.load(out / "ref.npz")
            t = data["t"]
            if not report.stops:
                rows.append({"error": f"no stop: {report.status.value}"})
                continue
            record = report.stops[0]
            row = {"status": report.status.value, "plan_time_requested": record.plan_time_requested,
                   "stop_time_s": record.stop_time_s, "ramp_s": record.ramp_s,
                   "computed_s": record.computed_s}
            rest = {}
            for arm in ("left", "right"):
                q = data[arm]
                moving = np.flatnonzero(np.abs(q - q[-1]).max(axis=1) > 1e-9)
                rest[arm] = float(t[moving[-1] + 1])
                from_request = t >= record.requested_at
                row[f"{arm}_hand_travel_m"] = hand_travel(scene, arm, q[from_request])
            row["rest_skew_s"] = abs(rest["left"] - rest["right"])
            # the prediction for this very request, at the lead the run used
            pred = stop_profile(plan, config.with_execution(start_lead_s=0.5), scene,
                                requests=[record.plan_time_requested])
            row["predicted_stop_time_s"] = float(pred.stop_time[0])
            for arm in ("left", "right"):
                row[f"{arm}_predicted_hand_travel_m"] = float(pred.hand_travel[arm][0])
            rows.append(row)
    return rows


def hold(config) -> dict:
    import dataclasses

    from mj_manipulator_ros.check.failure_band import failure_band
    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.sim.hold_overshoot import measure_hold
    from mj_manipulator_ros.sim.sim_config import ArmSimSettings, sim_config

    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    requests = np.linspace(0.0, plan.duration, 8)[1:-1]
    out = {"hold_overshoot_s": config.execution.hold_overshoot_s, "kinds": {}, "band": {}}
    for kind, name in (("position", "sim_openarm.yaml"), ("torque", "sim_openarm.yaml"),
                       ("mit", "sim_openarm_twin.yaml")):
        cfg = sim_config(load_config(config_file(name)))
        if kind == "torque":
            cfg = dataclasses.replace(cfg, sim=dataclasses.replace(
                cfg.sim, arms={a.name: ArmSimSettings(controller="torque")
                               for a in cfg.executor.arms}))
        h = measure_hold(cfg, plan, requests)
        run_on, arm, at = h.worst_run_on()
        out["kinds"][kind] = {"worst_run_on_s": run_on, "arm": arm, "at_plan_time": at,
                              "max_travel": max(float(np.max(v)) for v in h.travel.values())}
    for name in ("openarm_crossing", "openarm_wave"):
        out["band"][name] = failure_band(load_plan(share_dir() / f"config/plans/{name}.yaml"),
                                         config).to_dict()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    config = load_config_with_model(config_file("sim_openarm.yaml"))
    scene = scene_for(config)
    print(json.dumps({"conditions": "2-core machine, idle; predicted: start lead 0.25 s, full "
                                    "speed; measured: start lead 0.5 s, real time",
                      "predicted": predicted(config, scene),
                      "measured": measured(config, scene, args.runs),
                      "hold": hold(config)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
