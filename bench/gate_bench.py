"""What checking everything an arm can hit costs the pre-flight gate. Prints JSON; not a test.

On the OpenArm pair (``config/openarm_bimanual.yaml``) and both shipped plans, the gate's work
(synchronized continuous replay + the 0.25 s stop band), best of 7, one core, measured in one run
against the baseline of the same run:

- ``arm_arm``: arm-arm pairs only, no allowed-collision matrix (the gate before the matrix);
- ``everything``: arm-arm, arm-environment and self-collision, the generated matrix (the gate);
- ``everything_unproven``: the same without the matrix's proven (``never``/``never_touch``)
  pairs: what proving them buys.

- ``everything_reference_loop``: ``everything`` with the per-state loop in Python instead of
  the C kernel (``check/_contact_kernel.c``), and ``kernel_speedup`` = its time over the
  kernel's (the kernel is None when it was not built: the ratio is then 1).

Also the matrix's generation time (uncached) and its pairs per reason. Target: ``everything``
within 1.5x of ``arm_arm``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.model.allowed_collisions import (AllowReason, AllowedCollisionMatrix,
                                                          generate)
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file, share_dir

PLANS = ("openarm_crossing", "openarm_wave")
SKEW_S = 0.25


def best_of(fn, repeats: int = 7) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    config = load_config(config_file("openarm_bimanual.yaml"))
    scene = scene_for(config)
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        acm = generate(scene.model, scene.arms, scene.initial_qpos, 0.005, cache_dir=Path(cache))
        t_generate = time.perf_counter() - t0
    proven = (AllowReason.NEVER, AllowReason.NEVER_TOUCH)
    unproven = dataclasses.replace(acm, pairs=tuple(p for p in acm.pairs if p.reason not in proven))
    empty = AllowedCollisionMatrix((), 0, 0.005, "none")
    checkers = {
        "arm_arm": PlanReplayChecker.from_scene(scene, arm_env=False, self_collision=False,
                                                allowed=empty),
        "everything": PlanReplayChecker.from_scene(scene, allowed=acm),
        "everything_unproven": PlanReplayChecker.from_scene(scene, allowed=unproven),
    }
    out = {"benchmark": "gate", "one_core": True, "stop_band_s": SKEW_S,
           "matrix_generation_s": round(t_generate, 2), "matrix_pairs": acm.count(),
           "plans": {}}
    for name in PLANS:
        plan = load_plan(share_dir() / f"config/plans/{name}.yaml")
        row = {"duration_s": plan.duration}
        for label, checker in checkers.items():
            sync = checker.check(plan, mode="synchronized", continuous=True)
            band = checker.check(plan, mode="band", skew=SKEW_S)
            row[label] = {
                "gate_s": round(best_of(lambda: (
                    checker.check(plan, mode="synchronized", continuous=True),
                    checker.check(plan, mode="band", skew=SKEW_S))), 3),
                "synchronized_s": round(best_of(lambda: checker.check(
                    plan, mode="synchronized", continuous=True)), 3),
                "collision_free": sync.collision_free and band.collision_free,
                "extra_states": sync.extra_states_checked,
                "min_clearance_mm": {k: round(v["distance"] * 1e3, 1)
                                     for k, v in sync.min_clearance.items()}}
        # the same gate with the per-state loop in Python (the C kernel's reference)
        reference = checkers["everything"]
        kernel, reference.kernel = reference.kernel, None
        try:
            row["everything_reference_loop"] = {"gate_s": round(best_of(lambda: (
                reference.check(plan, mode="synchronized", continuous=True),
                reference.check(plan, mode="band", skew=SKEW_S))), 3)}
        finally:
            reference.kernel = kernel
        row["kernel_speedup"] = round(row["everything_reference_loop"]["gate_s"]
                                      / row["everything"]["gate_s"], 2)
        base = row["arm_arm"]["gate_s"]
        row["everything_over_arm_arm"] = round(row["everything"]["gate_s"] / base, 2)
        row["unproven_over_arm_arm"] = round(row["everything_unproven"]["gate_s"] / base, 2)
        out["plans"][name] = row
    out["target_ratio"] = 1.5
    out["meets_target"] = all(r["everything_over_arm_arm"] <= 1.5 for r in out["plans"].values())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
