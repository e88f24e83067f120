"""Replay-checker speed on the OpenArm pair and the crossing plan. Prints JSON; not a test.

- discrete states/s of the checker (synchronized, every state) against the raw bound measured in
  the same run: a bare loop of mj_kinematics + mj_collision over the same states on the plain
  model (no margins). Target >= 0.5x the bound.
- the whole crossing plan with the continuous check, wall time. Target < 1 s on one core.
"""

from __future__ import annotations

import json
import os
import time

import mujoco

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.check.timeline import build_timeline
from mj_manipulator_ros.resources import config_file, share_dir
from mj_manipulator_ros.model.scene import scene_for


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    config = load_config(config_file("sim_openarm.yaml"))
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    scene = scene_for(config)
    checker = PlanReplayChecker.from_scene(scene)
    tl = build_timeline(plan, "synchronized")
    n = len(tl)
    m, d = scene.model, mujoco.MjData(scene.model)

    def raw():
        for k in range(n):
            d.qpos[:] = scene.initial_qpos
            for name, arm in scene.arms.items():
                d.qpos[arm.qpos_adr] = tl.positions[name][k]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_collision(m, d)
    t_raw, _ = best_of(raw)
    t_disc, r_disc = best_of(lambda: checker.check(plan, continuous=False))
    t_cont, r_cont = best_of(lambda: checker.check(plan, continuous=True))
    t_seq, r_seq = best_of(lambda: checker.check(plan, mode="sequential", continuous=True))
    t_band, r_band = best_of(lambda: checker.check(plan, mode="band", skew=0.25))
    # the band width at which the crossing plan first collides (bisection to 10 ms)
    clear_at, colliding_at = 0.25, None
    width = 0.5
    while colliding_at is None and width < plan.duration:
        if checker.check(plan, mode="band", skew=width).collision_free:
            clear_at, width = width, width * 2
        else:
            colliding_at = width
    while colliding_at is not None and colliding_at - clear_at > 0.01:
        mid = round((clear_at + colliding_at) / 2, 4)
        if checker.check(plan, mode="band", skew=mid).collision_free:
            clear_at = mid
        else:
            colliding_at = mid
    print(json.dumps({
        "benchmark": "replay_checker", "states": n, "one_core": True,
        "raw_bound_states_per_s": round(n / t_raw),
        "discrete_states_per_s": round(n / t_disc),
        "discrete_over_raw": round(t_raw / t_disc, 3), "target_discrete_over_raw": 0.5,
        "continuous_whole_plan_s": round(t_cont, 3), "target_continuous_s": 1.0,
        "continuous_extra_states": r_cont.extra_states_checked,
        "sequential_continuous_s": round(t_seq, 3),
        "synchronized_colliding": f"{r_cont.colliding_states} of {r_cont.states_checked}",
        "sequential_colliding": f"{r_seq.colliding_states} of {r_seq.states_checked}",
        "horizon_m": checker.horizon,
        "band_0_25_s": round(t_band, 3), "target_band_s": 1.0,
        "band_0_25_states": r_band.states_checked,
        "band_0_25_colliding": r_band.colliding_states + r_band.between_state_collisions,
        "band_clear_up_to_s": clear_at, "band_first_collides_at_s": colliding_at,
        "meets_targets": t_raw / t_disc >= 0.5 and t_cont < 1.0 and t_band < 1.0,
    }, indent=2))


if __name__ == "__main__":
    main()
