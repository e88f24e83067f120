"""Where an execution is (core/execution_phase.py): the table's rules, and the phases real
executions go through, with their times (tiny pair, real rclpy and DDS, real MuJoCo): a plain
run, a run checked already, a pause during the pre-flight gate, an approach, and a refusal."""

from __future__ import annotations

import threading
import time

import pytest

import dataclasses

from mj_manipulator_ros.core.errors import (
    ExecutionRefusedError, IllegalTransitionError, PlanError, StartStateError)
from mj_manipulator_ros.core.execution_phase import TRANSITIONS, ExecutionPhase, PhaseLog
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus
from mj_manipulator_ros.core.sync import CancelScope, Failure, FailureReason
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from factories import make_config, make_plan
from test_pause_before_start import paused_in_the_gate
from test_start_state import plan_from
from tiny_arm import swing, tiny_config

E = ExecutionPhase


def test_every_phase_but_done_and_running_can_end_and_done_is_final() -> None:
    """Running goes through observing: a run that ran is observed."""
    ends = {p for p in ExecutionPhase if (p, E.DONE) in TRANSITIONS}
    assert ends == set(ExecutionPhase) - {E.DONE, E.RUNNING}
    assert not any(a is E.DONE for a, _ in TRANSITIONS)


@pytest.mark.parametrize("path", [[E.RUNNING], [E.VALIDATING, E.STAMPING],
                                  [E.WAITING, E.START_CHECK, E.STAMPING, E.RUNNING, E.DONE],
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
    # running begins at the stamp: it holds the start lead, then the plan's second (stamping
    # is the arms' discovery and the gate; it held the lead only in name, and passed on the
    # 0.5 s discovery settle the arms then always waited)
    assert report.phase_times["running"] >= 1.0 + report.start_lead_s * 0.9
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


# -- the rest of the table, each transition forced against scripted controllers ------------
# (real action servers in this process: ``ros/scripted_controller.py``; no joint states, so
# the start-state and clock checks are off: ``factories.make_config``)

def _resume_once_held(executor, out: dict, limit_s: float = 20.0) -> threading.Thread:
    """A thread that resumes ``executor`` once its execution is held (bounded)."""
    def go() -> None:
        deadline = time.monotonic() + limit_s
        while executor.phases.phase is not E.HELD and time.monotonic() < deadline:
            time.sleep(0.01)
        out["resumed"] = executor.resume()
    thread = threading.Thread(target=go)
    thread.start()
    return thread


def test_a_closed_executor_refuses_from_idle(ros) -> None:
    """idle -> done."""
    executor = MultiArmExecutor(make_config(), context=ros.context)
    executor.close()
    with pytest.raises(ExecutionRefusedError, match="closed"):
        executor.execute(make_plan())
    assert _order(executor) == [E.IDLE, E.DONE]


def test_a_plan_refused_ends_validating(ros) -> None:
    """validating -> done: a waypoint beyond its joint's limit."""
    plan = make_plan()
    bad = plan["left"].positions.copy()
    bad[2, 1] = 2.5
    plan = MultiArmPlan({"left": dataclasses.replace(plan["left"], positions=bad),
                         "right": plan["right"]})
    with MultiArmExecutor(make_config(), context=ros.context) as executor:
        with pytest.raises(PlanError, match="left_j1"):
            executor.execute(plan)
        assert _order(executor) == [E.IDLE, E.VALIDATING, E.DONE]


def test_a_canceled_execution_ends_waiting(ros) -> None:
    """waiting -> done: its scope failed before it could start; nothing is sent."""
    scope = CancelScope()
    scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None, "test: canceled first"))
    with MultiArmExecutor(make_config(), context=ros.context) as executor:
        report = executor.execute(make_plan(), scope=scope)
        assert _order(executor) == [E.IDLE, E.VALIDATING, E.WAITING, E.DONE]
    assert report.status is ExecutionStatus.CANCELED, report.summary()
    assert all(r.status is ArmStatus.NOT_SENT for r in report.arms.values())


def test_held_past_max_pause_ends_held(ros, scripted) -> None:
    """held -> done: held before the start for longer than max_pause_s: nothing sent."""
    ctl = scripted({"left": "succeed", "right": "succeed"})
    with MultiArmExecutor(make_config(max_pause_s=0.3), context=ros.context) as executor:
        assert executor.hold_next("test hold")
        report = executor.execute(make_plan())
        assert _order(executor) == [E.IDLE, E.VALIDATING, E.WAITING, E.HELD, E.DONE]
    assert "max_pause_s" in report.first_failure.error_string
    assert not ctl["left"].goals and not ctl["right"].goals


def test_held_then_resumed_into_the_approach(ros, scripted) -> None:
    """held -> approaching: a hold before an execution with ``approach``, then resume."""
    scripted({"left": "succeed", "right": "succeed"})
    out: dict = {}
    with MultiArmExecutor(make_config(), context=ros.context) as executor:
        assert executor.hold_next("test hold")
        thread = _resume_once_held(executor, out)
        report = executor.execute(make_plan(), approach=True)
        thread.join(30)
        order = _order(executor)
    assert out["resumed"] and report.succeeded, report.summary()
    assert order == [E.IDLE, E.VALIDATING, E.WAITING, E.HELD, E.APPROACHING] + RUN


def test_a_pause_during_the_approach_holds_after_it(ros, scripted, monkeypatch) -> None:
    """approaching -> held: the pause comes while the approach runs (forced: asked from
    inside it), the execution holds before its start check, then resumes."""
    scripted({"left": "succeed", "right": "succeed"})
    out: dict = {}
    with MultiArmExecutor(make_config(), context=ros.context) as executor:
        real = executor._approach

        def approach_then_pause(plan, scope):
            moved = real(plan, scope)
            out["paused"] = executor.pause("test: during the approach")
            return moved
        monkeypatch.setattr(executor, "_approach", approach_then_pause)
        thread = _resume_once_held(executor, out)
        report = executor.execute(make_plan(), approach=True)
        thread.join(30)
        order = _order(executor)
    assert out["paused"] and out["resumed"] and report.succeeded, report.summary()
    assert order == [E.IDLE, E.VALIDATING, E.WAITING, E.APPROACHING, E.HELD] + RUN


def test_a_pause_during_the_start_checks_holds_and_checks_again(ros, scripted,
                                                                monkeypatch) -> None:
    """start_check -> held -> start_check: the pause comes while the start checks run
    (forced: asked from inside them); after the resume they run again."""
    scripted({"left": "succeed", "right": "succeed"})
    out: dict = {"checks": 0}
    with MultiArmExecutor(make_config(), context=ros.context) as executor:
        real = executor.check_start

        def check_then_pause(plan, stop=lambda: False):
            real(plan, stop)
            out["checks"] += 1
            if out["checks"] == 1:
                out["paused"] = executor.pause("test: during the start checks")
        monkeypatch.setattr(executor, "check_start", check_then_pause)
        thread = _resume_once_held(executor, out)
        report = executor.execute(make_plan())
        thread.join(30)
        order = _order(executor)
    assert out["paused"] and out["resumed"] and report.succeeded, report.summary()
    assert out["checks"] == 2
    assert order == [E.IDLE, E.VALIDATING, E.WAITING, E.START_CHECK, E.HELD] + RUN


def test_a_gate_that_does_not_open_ends_stamping(ros, scripted) -> None:
    """stamping -> done: the second arm's action server is missing; nothing is sent. (An arm
    name no other test serves: a server another test of this worker made may still be in the
    DDS graph for a while after its participant left.)"""
    ctl = scripted({"left": "succeed"})
    arms = ("left", "never_served_b")
    with MultiArmExecutor(make_config(arms, server_wait_s=1.0),
                          context=ros.context) as executor:
        report = executor.execute(make_plan(arms))
        assert _order(executor) == [E.IDLE, E.VALIDATING, E.WAITING, E.START_CHECK, E.STAMPING,
                                    E.DONE]
    assert report.status is ExecutionStatus.FAILED and report.start_stamp is None
    assert not ctl["left"].goals


def test_an_approach_canceled_ends_approaching(tiny_sim, ros, tmp_path) -> None:
    """approaching -> done: the approach's move is aborted while it runs; the plan is not
    run."""
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    out: dict = {}
    with MultiArmExecutor(config, context=ros.context) as executor:
        def abort_in_the_approach() -> None:
            deadline = time.monotonic() + 20.0
            while not (executor.phases.phase is E.APPROACHING and executor.current_stamp
                       is not None) and time.monotonic() < deadline:
                time.sleep(0.01)
            out["aborted"] = executor.abort("test: abort during the approach")
        thread = threading.Thread(target=abort_in_the_approach)
        thread.start()
        report = executor.execute(plan_from({"left": [0.6, 0.0], "right": [0.0, 0.6]}),
                                  approach=True)
        thread.join(30)
        order = _order(executor)
        approach = executor.last_approach_report
    assert out["aborted"] and report.status is ExecutionStatus.CANCELED, report.summary()
    assert approach is not None and approach.status is ExecutionStatus.CANCELED
    assert order == [E.IDLE, E.VALIDATING, E.WAITING, E.APPROACHING, E.DONE]


def test_every_transition_of_the_table_is_forced_by_a_test_here() -> None:
    """The transitions these tests see, listed, against the table: a new row needs a test."""
    seen = {
        # a plain run, checked already, held in the gate, an approach, a refused start
        (E.IDLE, E.VALIDATING), (E.VALIDATING, E.WAITING), (E.WAITING, E.START_CHECK),
        (E.START_CHECK, E.STAMPING), (E.STAMPING, E.RUNNING), (E.RUNNING, E.OBSERVING),
        (E.OBSERVING, E.DONE), (E.IDLE, E.WAITING), (E.WAITING, E.HELD),
        (E.HELD, E.START_CHECK), (E.WAITING, E.APPROACHING), (E.APPROACHING, E.START_CHECK),
        (E.START_CHECK, E.DONE),
        # scripted: closed, refused, canceled, held too long, held into the approach, a pause
        # during the approach and during the checks, no gate; the approach refused
        (E.IDLE, E.DONE), (E.VALIDATING, E.DONE), (E.WAITING, E.DONE), (E.HELD, E.DONE),
        (E.HELD, E.APPROACHING), (E.APPROACHING, E.HELD), (E.START_CHECK, E.HELD),
        (E.STAMPING, E.DONE), (E.APPROACHING, E.DONE),
    }
    assert seen == set(TRANSITIONS)
