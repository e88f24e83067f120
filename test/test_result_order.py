"""A controller's own verdict, sent before the joint states that follow it, wins over the
watch's reading of those states: the executor never blames an arm (nor starts a controlled
stop of a goal the controller already ended) because its arm thread read the result a little
after the joint-state thread read the states."""

from __future__ import annotations

import threading
import time
from typing import Callable

from mj_manipulator_ros.core.report import ArmStatus, ExecutionReport
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.sim.sim_node import SimNode
from tiny_arm import swing, tiny_config


def run_with_a_busy_arm(ros, tmp_path, aborted: tuple[str, ...], busy: str,
                        until: Callable[[MultiArmExecutor], bool]) -> tuple:
    """The swing plan on the simulated tiny pair, the simulator aborting ``aborted``'s goals
    0.6 s in (an injected fault); ``busy``'s thread kept busy (its feedback hook) from 0.5 s
    in until ``until(executor)`` (at most 5 s), as a thread starved of the CPU would be.
    Returns (report, goals sent per arm, whether the arm was kept busy)."""
    cfg = tiny_config(tmp_path, sim={"real_time_factor": 1.0, "use_sim_time": False},
                      execution={"joint_state_timeout_s": 2.0})
    sim = SimNode(cfg, context=ros.context).start()
    for arm in aborted:
        sim.set_faults(arm, abort_after_s=0.6)
    held = threading.Event()
    try:
        with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
            def hook(arm: str, _feedback) -> None:
                stamp = executor.current_stamp
                if arm != busy or held.is_set() or stamp is None \
                        or executor.now() < stamp.seconds + 0.5:
                    return
                held.set()
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline and not until(executor):
                    time.sleep(0.002)
            executor.on_feedback = hook
            report: ExecutionReport = executor.execute(swing())
            sent = {a: len(r.sent) for a, r in executor.last_run.arms.items()}
    finally:
        sim.close()
    return report, sent, held.is_set()


def test_an_abort_read_after_the_states_that_follow_it_still_wins(ros, tmp_path) -> None:
    """The simulator aborts the left arm's goal 0.6 s in (an injected fault) and holds it; the
    plan moves on, so the joint states after the abort drift from the plan until the watch
    reads a violation (the left arm 0.1 s behind the right, or 0.1 rad off the plan). The left
    arm's thread is kept busy from just before the abort until the watch has judged: the abort
    sits delivered but unread while the states are judged. The first failure must be the
    controller's abort, and the left arm is sent nothing more (regression: ``left:
    progress_skew`` was the first failure, 103 ms, of a goal the simulator had aborted)."""
    def judged(executor: MultiArmExecutor) -> bool:   # the watch has judged the drift
        run = executor.last_run
        return executor.current_stamp is None or run.watch.violation is not None
    report, sent, held = run_with_a_busy_arm(ros, tmp_path, ("left",), "left", judged)
    assert held, report.summary()
    f = report.first_failure
    assert f is not None and f.arm == "left" and f.reason.value == "aborted" \
        and "injected fault" in f.error_string, report.summary()
    assert report.arms["left"].status is ArmStatus.ABORTED, report.summary()
    assert sent["left"] == 1, (sent, report.summary())
    assert report.arms["right"].stop_confirmed, report.summary()


def test_a_peer_whose_own_abort_is_waiting_is_not_sent_a_controlled_stop(ros, tmp_path) -> None:
    """Both goals aborted by the simulator 0.6 s in. The left arm's abort is read first and
    asks for a controlled stop of its peers; the right arm's thread is busy until then (its
    feedback hook), so its own abort waits, delivered but unread, when the stop's goal is to be
    sent. A goal its controller has ended is never replaced: the right arm is sent nothing
    more and ends aborted, in the controller's words (regression: the right arm was sent the
    stop's goal after its controller had aborted and held it, and ran it)."""
    report, sent, held = run_with_a_busy_arm(   # until the left arm's abort asked for the stop
        ros, tmp_path, ("left", "right"), "right", lambda executor: bool(executor.speed.stops))
    assert held, report.summary()
    assert [r.held for r in report.stops] == [("left",)], report.summary()
    assert sent == {"left": 1, "right": 1}, (sent, report.summary())
    assert all(r.status is ArmStatus.ABORTED and "injected fault" in r.error_string
               for r in report.arms.values()), report.summary()
