"""Simulator benchmarks. Prints JSON; not a test.

1. Cost per control cycle of the 2-arm OpenArm sim, pacing off, pinned to one core, moving
   (both controllers following the crossing plan) and holding; against bare ``mj_step`` on the
   same model in the same run (replaying the simulator's own ``ctrl`` sequence when moving, at
   rest when holding): the bound. Targets: >= 20x real time; sim/bare >= 0.85. Also every cycle
   in Python (``compiled=False``, the reference implementation): what the compiled follower buys.
2. Start skew over N synchronized executions (sim node + executor on loopback, real time):
   per execution, max - min motion onset of the arms (first control cycle at which each arm's
   reference leaves the plan's first point), and each onset's lateness after the start stamp.
   Target: skew <= 1 control period (2 ms at 500 Hz).

3. Timekeeping on a loaded machine: the simulator process beside 0-3 busy loops, with and
   without the physics thread's SCHED_FIFO request: worst stall, worst lag, achieved real-time
   factor (``loaded``).

4. The physics thread beside one busy Python thread of its own process, per switch interval
   (``sim.switch_interval_s``): control cycles a second (pacing off), and the busy thread's
   speed against its speed alone (``switch_interval``).

Usage: python bench/sim_bench.py [--executions 100] [--loaded-only]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from mj_manipulator_ros.core.config import load_config  # noqa: E402
from mj_manipulator_ros.core.plan_io import load_plan  # noqa: E402
from mj_manipulator_ros.resources import config_file, share_dir  # noqa: E402
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal  # noqa: E402
from mj_manipulator_ros.sim.shared_model import SharedModel  # noqa: E402
from mj_manipulator_ros.sim.sim_config import sim_config  # noqa: E402


def _submit_plan(shared: SharedModel, plan, tolerances, stamp: float) -> list:
    tickets = []
    for arm, traj in plan.arms.items():
        req = GoalRequest(traj.joint_names, traj.times.tolist(), traj.positions.tolist(),
                          traj.velocities.tolist(), [[] for _ in traj.times], stamp)
        reason, goal = check_goal(req, traj.joint_names, None, tolerances)
        assert reason is None, reason
        tickets.append(shared.controllers[arm].submit(goal))
    return tickets


def real_time_factor(cycles: int = 3000) -> dict:
    """Per control cycle, the simulator against bare ``mj_step`` on the same model, same run:

    - moving: both controllers following the crossing plan (the first ``cycles`` cycles, all
      within the plan); bound: bare ``mj_step`` replaying the very ``ctrl`` sequence the
      simulator produced (same motion, same contacts, no Python controller);
    - holding: after the plan, controllers idle; bound: bare ``mj_step`` at rest.
    """
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    scene = cfg.build_scene()
    model = scene.model
    period = 1.0 / cfg.sim.control_rate_hz
    assert cycles * period < plan.duration, "the moving phase must stay within the plan"

    def best_of(fn, repeats=3):
        return min(fn() for _ in range(repeats))

    ctrls = np.zeros((cycles, model.nu))

    def sim_moving(compiled=True):
        shared = SharedModel(scene, cfg.sim, compiled=compiled)
        _submit_plan(shared, plan, cfg.sim.tolerances, 0.0)
        t0 = time.perf_counter()
        for i in range(cycles):
            shared.step_cycle()
        wall = time.perf_counter() - t0
        return wall

    def record_ctrls():
        shared = SharedModel(scene, cfg.sim)
        _submit_plan(shared, plan, cfg.sim.tolerances, 0.0)
        for i in range(cycles):
            shared.step_cycle()
            ctrls[i] = shared.data.ctrl
        return shared

    moved = record_ctrls()

    def bare_moving():
        d = scene.initial_data()
        t0 = time.perf_counter()
        for i in range(cycles):
            d.ctrl[:] = ctrls[i]
            mujoco.mj_step(model, d, moved.steps_per_cycle)
        return time.perf_counter() - t0

    def sim_holding(compiled=True):
        shared = SharedModel(scene, cfg.sim, compiled=compiled)
        t0 = time.perf_counter()
        for _ in range(cycles):
            shared.step_cycle()
        return time.perf_counter() - t0

    def bare_holding():
        d = scene.initial_data()
        t0 = time.perf_counter()
        for _ in range(cycles):
            mujoco.mj_step(model, d, moved.steps_per_cycle)
        return time.perf_counter() - t0

    out = {"timestep_s": model.opt.timestep, "control_rate_hz": cfg.sim.control_rate_hz,
           "cycles": cycles}
    for phase, sim_fn, bare_fn in (("moving", sim_moving, bare_moving),
                                   ("holding", sim_holding, bare_holding)):
        sim_wall, bare_wall = best_of(sim_fn), best_of(bare_fn)
        python_wall = best_of(lambda: sim_fn(False))
        out[phase] = {"sim_us_per_cycle": round(sim_wall / cycles * 1e6, 1),
                      "bare_us_per_cycle": round(bare_wall / cycles * 1e6, 1),
                      "python_us_per_cycle": round(python_wall / cycles * 1e6, 1),
                      "sim_real_time_factor": round(cycles * period / sim_wall, 1),
                      "bare_real_time_factor": round(cycles * period / bare_wall, 1),
                      "sim_over_bare": round(bare_wall / sim_wall, 3),
                      "python_over_bare": round(bare_wall / python_wall, 3)}
    out["target_sim_over_bare"] = 0.85
    out["target_real_time_factor"] = 20
    out["meets_target_real_time"] = out["moving"]["sim_real_time_factor"] >= 20
    return out


def start_skew(executions: int) -> dict:
    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
    from mj_manipulator_ros.ros.context import RosContext
    from mj_manipulator_ros.ros.executor import MultiArmExecutor
    from mj_manipulator_ros.sim.sim_node import SimNode

    config = load_config(config_file("sim_openarm.yaml"))
    cfg = sim_config(config)
    skews, late = [], []
    with RosContext() as ros:
        sim = SimNode(cfg, context=ros.context).start()
        try:
            with MultiArmExecutor(config, context=ros.context) as executor:
                for k in range(executions):
                    arms = {}
                    snap = sim.shared.snapshot()
                    for name, arm in sim.scene.arms.items():
                        q0 = snap.arms[name].positions
                        q1 = q0 + (0.05 if k % 2 == 0 else -0.05)
                        arms[name] = ArmTrajectory(arm.joint_names, [0.0, 0.3], [q0, q1],
                                                   [np.zeros(7), np.zeros(7)])
                    report = executor.execute(MultiArmPlan(arms))
                    if not report.succeeded:
                        continue
                    onsets = [s.tickets[-1].motion_onset for s in sim.arms.values()]
                    skews.append(max(onsets) - min(onsets))
                    late.extend(o - report.start_stamp for o in onsets)
        finally:
            sim.close()
    period = 1.0 / cfg.sim.control_rate_hz
    s, lt = np.array(skews) * 1e3, np.array(late) * 1e3
    return {"executions": executions, "succeeded": len(skews),
            "start_skew_ms": {"median": round(float(np.median(s)), 3), "max": round(float(s.max()), 3)},
            "onset_after_stamp_ms": {"median": round(float(np.median(lt)), 3),
                                     "max": round(float(lt.max()), 3)},
            "control_period_ms": period * 1e3, "meets_target": float(s.max()) <= period * 1e3 + 1e-6,
            "note": "both arms run in one physics thread; onsets are control-cycle times"}


_LOADED_CHILD = r"""
import json, sys, time
from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.resources import config_file, share_dir
from mj_manipulator_ros.sim.sim_config import sim_config
from mj_manipulator_ros.sim.sim_node import SimNode
import dataclasses
sys.path.insert(0, sys.argv[3])
from sim_bench import _submit_plan
cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
cfg = dataclasses.replace(cfg, sim=dataclasses.replace(cfg.sim, thread_priority=int(sys.argv[1]),
                                                       max_lag_s=0.0))
plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
sim = SimNode(cfg).start()
time.sleep(1.0)
_submit_plan(sim.shared, plan, cfg.sim.tolerances, sim.shared.controller_time() + 0.1)
time.sleep(float(sys.argv[2]))
h = sim.shared.health()
sim.close()
print(json.dumps(dataclasses.asdict(h)))
"""


def loaded(busy: tuple[int, ...] = (0, 1, 2, 3), seconds: float = 6.0) -> list[dict]:
    """The simulator process (OpenArm pair, system clock, real time, publishing joint states,
    following the crossing plan) beside ``n`` busy loops (pure-Python ``while True: pass``
    processes), with and without the SCHED_FIFO request: worst stall between control cycles,
    worst lag behind real time, achieved real-time factor over the last second, each after
    ``seconds`` s of motion. The busy loops are ended with the run."""
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rows = []
    for n in busy:
        for prio in (0, 50):
            loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                     for _ in range(n)]
            try:
                out = subprocess.run([sys.executable, "-c", _LOADED_CHILD, str(prio),
                                      str(seconds), here], capture_output=True, text=True,
                                     timeout=120 + seconds)
            finally:
                for p in loops:
                    p.kill()
                    p.wait(10)
            health = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"busy_loops": n, "thread_priority": prio,
                         "scheduling": health["scheduling"],
                         "worst_stall_ms": round(health["worst_stall_s"] * 1e3, 1),
                         "worst_lag_ms": round(health["worst_lag_s"] * 1e3, 1),
                         "achieved_real_time_factor": round(health["real_time_factor"], 3)})
    return rows


def switch_interval(intervals=(0.005, 0.002, 0.001, 0.0005, 0.0002), seconds=2.0) -> list:
    """Per interval: the simulator's control cycles a second (pacing off, synchronous cycles)
    beside one busy Python thread, and that thread's speed beside it / alone."""
    import sys
    import threading

    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    scene = cfg.build_scene()

    def busy_for(s: float, beside=None) -> int:
        stop, count = threading.Event(), [0]

        def spin():
            x = 0
            while not stop.is_set():
                x += 1
            count[0] = x
        t = threading.Thread(target=spin)
        t.start()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < s:
            if beside is None:
                time.sleep(0.01)
            else:
                beside()
        stop.set()
        t.join()
        return count[0]

    saved, rows = sys.getswitchinterval(), []
    try:
        for interval in intervals:
            sys.setswitchinterval(interval)
            shared = SharedModel(scene, cfg.sim)
            beside = busy_for(seconds, shared.step_cycle)
            alone = busy_for(seconds)
            rows.append({"switch_interval_ms": interval * 1e3,
                         "cycles_per_s": round(shared.cycles / seconds),
                         "busy_thread_speed": round(beside / alone, 3)})
    finally:
        sys.setswitchinterval(saved)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=100)
    parser.add_argument("--loaded-only", action="store_true",
                        help="only the loaded-machine timekeeping rows")
    args = parser.parse_args()
    rows = loaded()
    switching = switch_interval()
    if args.loaded_only:
        print(json.dumps({"benchmark": "simulator", "cpus": os.cpu_count(), "loaded": rows,
                          "switch_interval": switching}, indent=2))
        return
    skew = start_skew(args.executions)   # before pinning to one core
    rtf = real_time_factor()
    print(json.dumps({"benchmark": "simulator", "cpus": os.cpu_count(), "real_time_factor": rtf,
                      "start_skew": skew, "loaded": rows, "switch_interval": switching},
                     indent=2))


if __name__ == "__main__":
    main()
