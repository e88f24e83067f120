"""Where an arm's part of an execution is (core/arm_phase.py): the table's rules, and the phases
a real arm's thread goes through in a real execution (tiny pair, real rclpy and DDS, real
MuJoCo): a plain run, a pause and a resume, a cancel, a controlled stop."""

from __future__ import annotations

import threading

import pytest

from mj_manipulator_ros.core.arm_phase import TRANSITIONS, ArmPhase, arm_transition
from mj_manipulator_ros.core.errors import IllegalTransitionError
from mj_manipulator_ros.core.report import ExecutionStatus
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from factories import wait_for_plan_time
from tiny_arm import swing, tiny_config

P = ArmPhase


def test_every_phase_but_done_can_end_and_done_is_final() -> None:
    assert all((p, P.DONE) in TRANSITIONS for p in ArmPhase if p is not P.DONE)
    assert not any(a is P.DONE for a, _ in TRANSITIONS)


@pytest.mark.parametrize("current, wanted", [
    (P.IDLE, P.RUNNING), (P.AT_GATE, P.RUNNING), (P.PAUSED, P.RUNNING), (P.PAUSED, P.STOPPING),
    (P.STOPPING, P.RUNNING), (P.DONE, P.DISCOVERING), (P.DISCOVERING, P.SENDING)])
def test_an_illegal_transition_is_refused_by_name(current, wanted) -> None:
    with pytest.raises(IllegalTransitionError) as err:
        arm_transition(current, wanted, "test", "left")
    text = str(err.value)
    assert f"arm 'left' phase: no transition from {current.value} to {wanted.value}" in text
    assert "asked for: test" in text


def _phases(tiny_sim, ros, tmp_path, act=None, duration: float = 3.0):
    """Run the tiny pair's swing; ``act(executor)`` at plan time 1.0 s. Returns the report and
    each arm's phases in order."""
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        thread = None
        if act is not None:
            thread = threading.Thread(target=lambda: (wait_for_plan_time(executor, 1.0),
                                                      act(executor)))
            thread.start()
        report = executor.execute(swing(duration))
        if thread is not None:
            thread.join(30)
            assert not thread.is_alive()
        runs = executor.last_run.arms
    return report, {a: [p for p, _cause in r.phases] for a, r in runs.items()}


HEAD = [P.DISCOVERING, P.AT_GATE, P.SENDING, P.RUNNING]


def test_a_plain_run(tiny_sim, ros, tmp_path) -> None:
    report, phases = _phases(tiny_sim, ros, tmp_path)
    assert report.succeeded, report.summary()
    assert phases == {"left": HEAD + [P.DONE], "right": HEAD + [P.DONE]}


def test_a_pause_and_a_resume(tiny_sim, ros, tmp_path) -> None:
    def pause_then_resume(executor) -> None:
        assert executor.pause("test pause")
        deadline = 100
        while not all(r.paused for r in executor.last_run.arms.values()) and deadline:
            threading.Event().wait(0.05)
            deadline -= 1
        assert executor.resume()
    report, phases = _phases(tiny_sim, ros, tmp_path, pause_then_resume)
    assert report.succeeded, report.summary()
    pause = [P.REPLACING, P.RUNNING, P.PAUSED, P.REPLACING, P.RUNNING, P.DONE]
    assert phases == {"left": HEAD + pause, "right": HEAD + pause}


def test_a_cancel(tiny_sim, ros, tmp_path) -> None:
    report, phases = _phases(tiny_sim, ros, tmp_path, lambda ex: ex.abort("test abort"))
    assert report.status is ExecutionStatus.CANCELED, report.summary()
    assert phases == {"left": HEAD + [P.STOPPING, P.DONE],
                      "right": HEAD + [P.STOPPING, P.DONE]}


def test_a_controlled_stop(tiny_sim, ros, tmp_path) -> None:
    report, phases = _phases(tiny_sim, ros, tmp_path, lambda ex: ex.stop("test stop"))
    assert report.status is ExecutionStatus.STOPPED, report.summary()
    assert phases == {"left": HEAD + [P.REPLACING, P.RUNNING, P.DONE],
                      "right": HEAD + [P.REPLACING, P.RUNNING, P.DONE]}
