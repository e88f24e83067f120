"""Where an execution is (core/execution_phase.py): the table's rules, and the phases real
executions go through, with their times (tiny pair, real rclpy and DDS, real MuJoCo): a plain
run, a run checked already, a pause during the pre-flight gate, an approach, and a refusal."""

from __future__ import annotations

import threading
import time

import pytest

from mj_manipulator_ros.core.errors import IllegalTransitionError, StartStateError
from mj_manipulator_ros.core.execution_phase import TRANSITIONS, ExecutionPhase, PhaseLog
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from test_pause_before_start import paused_in_the_gate
from test_start_state import plan_from
from tiny_arm import swing, tiny_config

E = ExecutionPhase


def test_every_phase_but_done_can_end_and_done_is_final() -> None:
    assert all((p, E.DONE) in TRANSITIONS for p in ExecutionPhase if p is not E.DONE)
    assert not any(a is E.DONE for a, _ in TRANSITIONS)


@pytest.mark.parametrize("path", [[E.RUNNING], [E.VALIDATING, E.STAMPING],
                                  [E.WAITING, E.START_CHECK, E.RUNNING],
                                  [E.WAITING, E.START_CHECK, E.STAMPING, E.HELD]])
def test_an_illegal_transition_is_refused_by_name(path) -> None:
    log = PhaseLog()
    for phase in path[:-1]:
        log.enter(phase, 0.0)
    with pytest.raises(IllegalTransitionError, match=f"no transition from "
                       f"{(path[-2] if len(path) > 1 else E.IDLE).value} to {path[-1].value}"):
        log.enter(path[-1], 1.0)


def test_durations_sum_a_phase_entered_twice() -> None:
    log = PhaseLog()
    for phase, t in ((E.WAITING, 1.0), (E.START_CHECK, 1.5), (E.HELD, 2.0),
                     (E.START_CHECK, 5.0), (E.STAMPING, 5.25), (E.DONE, 5.5)):
        log.enter(phase, t)
    assert log.durations() == {"waiting": 0.5, "start_check": 0.75, "held": 3.0,
                               "stamping": 0.25}


def _order(executor) -> list:
    return [p for p, _t, _why in executor.phases.entries]


RUN = [E.START_CHECK, E.STAMPING, E.RUNNING, E.OBSERVING, E.DONE]


def test_a_plain_run_and_a_run_checked_already(tiny_sim, ros, tmp_path) -> None:
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        report = executor.execute(swing(1.0))
        plain = _order(executor)
        executor.check(swing(1.0))
        checked_report = executor.execute(swing(1.0), checked=True)
        checked = _order(executor)
    assert report.succeeded and checked_report.succeeded, report.summary()
    assert plain == [E.IDLE, E.VALIDATING, E.WAITING] + RUN
    assert checked == [E.IDLE, E.WAITING] + RUN
    assert list(report.phase_times) == ["validating", "waiting", "start_check", "stamping",
                                        "running", "observing"]
    # stamping holds the start lead; running the plan's second
    assert report.phase_times["stamping"] >= config.execution.start_lead_s * 0.9
    assert report.phase_times["running"] >= 1.0
    assert "  phases: validating " in report.summary()


def test_a_pause_during_the_gate_is_a_held_phase(tiny_sim, ros, tmp_path) -> None:
    with paused_in_the_gate(tiny_sim, ros, tmp_path) as (node, executor, gate, thread, out):
        gate.release.set()
        time.sleep(1.5)
        assert executor.phases.phase is E.HELD
        assert executor.resume() is True
    report = out["report"]
    assert report.succeeded, report.summary()
    assert _order(executor) == [E.IDLE, E.VALIDATING, E.WAITING, E.HELD] + RUN
    assert report.phase_times["held"] >= 1.0


def test_an_approach_then_the_plan(tiny_sim, ros, tmp_path) -> None:
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        report = executor.execute(plan_from({"left": [0.3, 0.0], "right": [0.0, 0.2]}),
                                  approach=True)
        order = _order(executor)
    assert report.succeeded, report.summary()
    assert order == [E.IDLE, E.VALIDATING, E.WAITING, E.APPROACHING] + RUN


def test_a_refused_start_ends_the_execution_in_its_start_check(tiny_sim, ros, tmp_path) -> None:
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        with pytest.raises(StartStateError):
            executor.execute(plan_from({"left": [1.5, 0.0], "right": [0.0, 0.0]}))
        order = _order(executor)
    assert order == [E.IDLE, E.VALIDATING, E.WAITING, E.START_CHECK, E.DONE]
