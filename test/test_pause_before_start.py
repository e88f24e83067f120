"""A pause asked while an execution is being checked (validation, the pre-flight gate, the start
checks) is honoured: nothing is sent until resume; a stop then ends it with nothing sent.

Regression: between acceptance and the stamp ``pause`` answered "nothing to pause (state idle)"
and the arms then started as if nothing had been asked. The moment is forced: the pre-flight
callable blocks until the test has asked for the pause."""

from __future__ import annotations

import contextlib
import threading
import time

from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus
from mj_manipulator_ros.ros.execution_run import ExecutionRun
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from test_start_state import plan_from
from tiny_arm import tiny_config


class GateThatWaits:
    """A pre-flight callable that says when it is entered and returns only when released."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, plan, held=None, grippers=None):
        self.entered.set()
        assert self.release.wait(30.0), "the test never released the gate"


@contextlib.contextmanager
def paused_in_the_gate(tiny_sim, ros, tmp_path, **execution):
    """An execution of the tiny pair held in its pre-flight gate while the test asks for a
    pause; yields (sim node, executor, gate, execute thread, {"report": ...}). The gate is
    released and the thread joined (bounded) on the way out."""
    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True, **execution}).executor
    gate = GateThatWaits()
    out: dict = {}
    with MultiArmExecutor(config, context=ros.context, preflight=gate) as executor:
        plan = plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]})
        thread = threading.Thread(target=lambda: out.update(report=executor.execute(plan)),
                                  name="test-execute")
        thread.start()
        try:
            assert gate.entered.wait(30.0)
            assert executor.pause("operator pause") is True
            yield node, executor, gate, thread, out
        finally:
            gate.release.set()
            thread.join(60.0)
    assert not thread.is_alive()


def test_a_pause_during_the_pre_flight_holds_until_resumed(tiny_sim, ros, tmp_path) -> None:
    with paused_in_the_gate(tiny_sim, ros, tmp_path) as (node, executor, gate, thread, out):
        assert executor.held_before_start
        gate.release.set()
        # the start checks take about 1 s (the clock window); hold well past them
        time.sleep(2.0)
        assert thread.is_alive(), out
        assert node.arms["left"].tickets == [] and node.arms["right"].tickets == [], \
            "a goal was sent while paused before the start"
        assert executor.resume() is True and not executor.held_before_start
    report = out["report"]
    assert report.status is ExecutionStatus.SUCCEEDED, report.summary()
    assert len(node.arms["left"].tickets) == 1 and len(node.arms["right"].tickets) == 1


def test_a_stop_after_a_pause_before_the_start_sends_nothing(tiny_sim, ros, tmp_path) -> None:
    with paused_in_the_gate(tiny_sim, ros, tmp_path) as (node, executor, gate, thread, out):
        gate.release.set()
        time.sleep(1.5)
        assert executor.stop("operator stop") is True
    report = out["report"]
    assert report.status is ExecutionStatus.CANCELED, report.summary()
    assert all(r.status is ArmStatus.NOT_SENT for r in report.arms.values()), report.summary()
    assert node.arms["left"].tickets == [] and node.arms["right"].tickets == []


def test_a_pause_before_the_start_that_outlives_max_pause_sends_nothing(tiny_sim, ros,
                                                                       tmp_path) -> None:
    with paused_in_the_gate(tiny_sim, ros, tmp_path, max_pause_s=0.5) as (node, _, gate,
                                                                          thread, out):
        gate.release.set()
        thread.join(60.0)
    report = out["report"]
    assert report.status is ExecutionStatus.CANCELED, report.summary()
    assert "longer than execution.max_pause_s = 0.5 s: nothing was sent" in \
        report.first_failure.error_string
    assert node.arms["left"].tickets == [] and node.arms["right"].tickets == []


def test_a_pause_while_the_stamp_is_made_is_a_pause_along_the_plan_never_held(
        tiny_sim, ros, tmp_path, monkeypatch) -> None:
    """A pause asked after the last start check, while the stamp is being made (forced: asked
    as the start gate opens): the goals go out and the run pauses as it begins, so it must not
    be reported as held before the start (regression: ``held_before_start`` said so, and
    ``execute``'s Ctrl-Z printed "held before the start: nothing is sent until resumed" while
    the stamp was made and the goals sent)."""
    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    seen: dict = {}
    out: dict = {}
    open_gate = ExecutionRun._open_gate
    with MultiArmExecutor(config, context=ros.context) as executor:
        def pause_then_open(run):
            seen["paused"] = executor.pause("operator pause")
            seen["held"] = executor.held_before_start
            return open_gate(run)
        monkeypatch.setattr(ExecutionRun, "_open_gate", pause_then_open)
        plan = plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]})
        thread = threading.Thread(target=lambda: out.update(report=executor.execute(plan)),
                                  name="test-execute")
        thread.start()
        try:
            deadline = time.monotonic() + 30.0
            while executor.speed.state != "paused" and thread.is_alive() and \
                    time.monotonic() < deadline:
                time.sleep(0.01)
            assert executor.speed.state == "paused", (seen, out)
            assert executor.resume() is True
        finally:
            thread.join(60.0)
    assert not thread.is_alive()
    assert seen == {"paused": True, "held": False}, seen
    report = out["report"]
    assert report.status is ExecutionStatus.SUCCEEDED, report.summary()
    assert [r.kind for r in report.stops] == ["pause"], report.summary()
    assert len(node.arms["left"].tickets) >= 1 and len(node.arms["right"].tickets) >= 1


def test_a_pause_after_the_motion_ended_is_refused_never_held(tiny_sim, ros, tmp_path,
                                                               monkeypatch) -> None:
    """A pause asked after the plan's motion ended, while the report is being made (forced:
    asked as the run makes its report, its motion idle again): refused as nothing running,
    never answered "held before the start" (regression: it returned True and no pause was
    ever made; the random operator sequences found it, seed 4: a pause at plan time 1.752 of
    a 1.5 s plan)."""
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    seen: dict = {}
    make_report = ExecutionRun._report
    with MultiArmExecutor(config, context=ros.context) as executor:
        def pause_then_report(run):
            seen["paused"] = executor.pause("operator pause")
            seen["answer"] = executor.last_answer()
            seen["held"] = executor.held_before_start
            return make_report(run)
        monkeypatch.setattr(ExecutionRun, "_report", pause_then_report)
        report = executor.execute(plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]}))
        monkeypatch.undo()
        assert report.status is ExecutionStatus.SUCCEEDED, report.summary()
        assert seen["paused"] is False and seen["held"] is False, seen
        assert seen["answer"].refusal.value == "nothing_running", seen["answer"]
        assert "ended" in seen["answer"].why, seen["answer"]
        # and the next execution is not held by it
        again = executor.execute(plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]}))
    assert again.status is ExecutionStatus.SUCCEEDED, again.summary()
    assert not report.stops, report.summary()
