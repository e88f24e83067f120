"""A long-running process keeps nothing per finished goal that every full garbage collection
would scan (core/heap.py): the cause of ``late_acceptance`` on a loaded machine was the
simulator's full collections growing past 190 ms as finished goals' messages piled up."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import yaml
from trajectory_msgs.msg import JointTrajectoryPoint

from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from tiny_arm import sim_then_sigint, tiny_config, tiny_mapping

POINTS = 301


def out_and_back(duration: float = 1.0) -> MultiArmPlan:
    """Both tiny arms 0.2 rad out on j1 and back, on a POINTS-point grid."""
    t = np.linspace(0.0, duration, POINTS)
    s = np.sin(np.pi * t / duration) ** 2
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.outer(s, [0.2, 0.0]))
                         for a in ("left", "right")})


def live_points() -> int:
    """JointTrajectoryPoint messages alive in this process (after a full collection)."""
    gc.collect()
    return sum(type(o) is JointTrajectoryPoint for o in gc.get_objects())


def test_finished_goals_leave_no_messages_in_the_servers(tiny_sim, ros, tmp_path) -> None:
    """Four executions of a 301-point plan on the simulator (in this process): the points
    alive afterwards do not grow with the number of goals. Before the fix each finished goal's
    request stayed in rclpy's goal handle for the 15 minutes its result is kept: 602 more
    points alive per execution."""
    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    plan = out_and_back()
    counts = []
    with MultiArmExecutor(config, context=ros.context) as executor:
        for _ in range(4):
            report = executor.execute(plan)
            assert report.succeeded, report.summary()
            counts.append(live_points())
    assert len(node.arms["left"].tickets) == 4
    growth = counts[-1] - counts[0]
    assert growth < POINTS, (
        f"{growth} JointTrajectoryPoint messages more alive after 3 more goals of {POINTS} "
        f"points per arm (after each execution: {counts}): finished goals keep their messages")


def test_the_simulator_process_freezes_its_start_up(tmp_path) -> None:
    """``run_sim`` (the ``sim`` command) moves the objects of its start-up out of the
    collector's scans once it runs: a full collection in the running simulator then visits a
    small fraction of what it holds. Measured in a real simulator process, which stops itself
    (SIGINT) right after."""
    code = sim_then_sigint(
        tmp_path, on_start="print('FROZEN', n, 'TRACKED', len(gc.get_objects()), flush=True)")
    try:   # (it starts in ~1 s idle; without the freeze it would run until killed)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"run_sim never froze its start-up (still running after 60 s): "
                             f"{exc.stdout}") from None
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("FROZEN")), None)
    assert line is not None, f"run_sim never froze its start-up:\n{out.stdout}\n{out.stderr}"
    _, frozen, _, tracked = line.split()
    assert int(frozen) > 10 * int(tracked), line
    assert out.returncode == 0, out.stderr


def test_each_bring_up_stage_starts_with_the_heap_frozen_and_hands_it_back(tmp_path) -> None:
    """The rehearsal runs the simulator, the executor and the measurements in one process
    (hil --sim): whatever that process holds when a stage starts is out of the collector's
    scans for the stage. Measured in a process holding 300,000 tracked objects (as a pytest
    worker does after a few hundred tests; there its full collections took 100-290 ms and a
    healthy arm's goal was taken 180 ms after the start stamp): at the start of each of stages
    1 (tiny pair), every one of them is frozen. When ``run_hil`` returns, nothing stays frozen
    and its session is collected: a process that lives on (a pytest worker running bring-ups in
    process) must not keep each run's simulator and buffers forever (before the fix the
    workers grew to 5-6 GB)."""
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_mapping(tmp_path)))
    code = ("import gc, weakref\n"
            "import mj_manipulator_ros.core.heap as heap\n"
            "import mj_manipulator_ros.hil.session as hs\n"
            "from mj_manipulator_ros.hil.runner import run_hil\n"
            "seen, sessions = [], []\n"
            "real_freeze, real_init = heap.freeze_startup, hs.HilSession.__init__\n"
            "def probe():\n"
            "    seen.append(real_freeze())\n"
            "    return seen[-1]\n"
            "def init(self, *a, **k):\n"
            "    real_init(self, *a, **k)\n"
            "    sessions.append(weakref.ref(self))\n"
            "heap.freeze_startup, hs.HilSession.__init__ = probe, init\n"
            "ballast = [[k] for k in range(300000)]\n"
            f"code = run_hil({str(path)!r}, sim=True, through=1, yes=True, "
            f"results={str(tmp_path / 'r')!r}, say=lambda s: None)\n"
            "gc.collect()\n"
            "print('CODE', code, 'DURING', min(seen, default=0), 'AFTER', gc.get_freeze_count(),"
            " 'SESSIONS', len(sessions), 'ALIVE', sum(r() is not None for r in sessions),"
            " flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("CODE")), None)
    assert line is not None, f"{out.stdout}\n{out.stderr}"
    values = dict(zip(line.split()[::2], line.split()[1::2]))
    assert values["CODE"] == "0", line
    assert int(values["DURING"]) >= 300000, f"a stage ran with the ballast unfrozen: {line}"
    assert values["SESSIONS"] == "1", line
    assert values["AFTER"] == "0", f"run_hil returned with the heap still frozen: {line}"
    assert values["ALIVE"] == "0", f"the finished run's session is never collected: {line}"
