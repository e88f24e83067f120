"""A controller's own verdict, sent before the joint states that follow it, wins over the
watch's reading of those states: the executor never blames an arm (nor starts a controlled
stop of a goal the controller already ended) because its arm thread read the result a little
after the joint-state thread read the states."""

from __future__ import annotations

import threading
import time

import numpy as np

from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.report import ArmStatus
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.sim.sim_node import SimNode
from tiny_arm import tiny_config


def swing(duration: float = 3.0) -> MultiArmPlan:
    t = np.linspace(0.0, duration, 31)
    s = np.sin(np.pi * t / duration) ** 2
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.outer(s, [0.4, 0.3]))
                         for a in ("left", "right")})


def test_an_abort_read_after_the_states_that_follow_it_still_wins(ros, tmp_path) -> None:
    """The simulator aborts the left arm's goal 0.6 s in (an injected fault) and holds it; the
    plan moves on, so the joint states after the abort drift from the plan until the watch
    reads a violation (the left arm 0.1 s behind the right, or 0.1 rad off the plan). The left arm's thread is kept busy from just before the
    abort (its feedback hook) until the watch has read that error, as a starved thread would
    be: the abort then sits delivered but unread while the states are judged. The first failure
    must be the controller's abort, and the left arm, whose goal the controller ended, must not
    be sent a controlled stop (regression: ``left: tracking_error`` first, the left arm sent a
    stop goal after its abort and moved again)."""
    cfg = tiny_config(tmp_path, sim={"real_time_factor": 1.0, "use_sim_time": False},
                      execution={"joint_state_timeout_s": 2.0})
    sim = SimNode(cfg, context=ros.context).start()
    sim.set_faults("left", abort_after_s=0.6)
    held = threading.Event()
    try:
        with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
            def busy_left(arm: str, feedback) -> None:
                stamp = executor.current_stamp
                if arm != "left" or held.is_set() or stamp is None \
                        or executor.now() < stamp.seconds + 0.5:
                    return
                held.set()
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline:   # until the watch has judged the drift
                    watch = executor._watch
                    if watch is None or watch.violation is not None:
                        break
                    time.sleep(0.002)
            executor.on_feedback = busy_left
            report = executor.execute(swing())
            runs = executor._last_runs
            stop_goals = {a: sum(1 for _, goal in r.sent[1:]) for a, r in runs.items()}
    finally:
        sim.close()
    assert held.is_set(), report.summary()
    f = report.first_failure
    assert f is not None and f.arm == "left" and f.reason.value == "aborted" \
        and "injected fault" in f.error_string, report.summary()
    assert report.arms["left"].status is ArmStatus.ABORTED, report.summary()
    assert stop_goals["left"] == 0, (stop_goals, report.summary())
    assert report.arms["right"].stop_confirmed, report.summary()


def test_a_peer_whose_own_abort_is_waiting_is_not_sent_a_controlled_stop(ros, tmp_path) -> None:
    """Both goals aborted by the simulator 0.6 s in. The left arm's abort is read first and
    asks for a controlled stop of its peers; the right arm's thread is busy until then (its
    feedback hook), so its own abort waits, delivered but unread, when the stop's goal is to be
    sent. A goal its controller has ended is never replaced: the right arm is sent nothing
    more and ends aborted, in the controller's words (regression: the right arm was sent the
    stop's goal after its controller had aborted and held it, and ran it)."""
    cfg = tiny_config(tmp_path, sim={"real_time_factor": 1.0, "use_sim_time": False},
                      execution={"joint_state_timeout_s": 2.0})
    sim = SimNode(cfg, context=ros.context).start()
    for arm in ("left", "right"):
        sim.set_faults(arm, abort_after_s=0.6)
    held = threading.Event()
    try:
        with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
            def busy_right(arm: str, feedback) -> None:
                stamp = executor.current_stamp
                if arm != "right" or held.is_set() or stamp is None \
                        or executor.now() < stamp.seconds + 0.5:
                    return
                held.set()
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline and not executor.speed.stops:
                    time.sleep(0.002)    # until the left arm's abort has asked for the stop
            executor.on_feedback = busy_right
            report = executor.execute(swing())
            sent = {a: len(r.sent) for a, r in executor._last_runs.items()}
    finally:
        sim.close()
    assert held.is_set(), report.summary()
    assert [r.held for r in report.stops] == [("left",)], report.summary()
    assert sent == {"left": 1, "right": 1}, (sent, report.summary())
    assert all(r.status is ArmStatus.ABORTED and "injected fault" in r.error_string
               for r in report.arms.values()), report.summary()
