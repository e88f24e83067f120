"""A pause asked while an execution is being checked (validation, the pre-flight gate, the start
checks) is honoured: nothing is sent until resume; a stop then ends it with nothing sent.

Regression: between acceptance and the stamp ``pause`` answered "nothing to pause (state idle)"
and the arms then started as if nothing had been asked. The moment is forced: the pre-flight
callable blocks until the test has asked for the pause."""

from __future__ import annotations

import threading
import time

import pytest

from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from test_start_state import plan_from
from tiny_arm import tiny_config


class GateThatWaits:
    """A pre-flight callable that says when it is entered and returns only when released."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, plan, held=None):
        self.entered.set()
        assert self.release.wait(30.0), "the test never released the gate"


def start(executor, plan, **kwargs):
    out = {}
    thread = threading.Thread(target=lambda: out.update(report=executor.execute(plan, **kwargs)),
                              name="test-execute")
    thread.start()
    return thread, out


def test_a_pause_during_the_pre_flight_holds_until_resumed(tiny_sim, ros, tmp_path) -> None:
    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    gate = GateThatWaits()
    with MultiArmExecutor(config, context=ros.context, preflight=gate) as executor:
        thread, out = start(executor, plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]}))
        try:
            assert gate.entered.wait(30.0)
            assert executor.pause("operator pause") is True
            assert executor.held_before_start
            gate.release.set()
            # the start checks take about 1 s (the clock window); hold well past them
            time.sleep(2.0)
            assert thread.is_alive(), out
            assert node.arms["left"].tickets == [] and node.arms["right"].tickets == [], \
                "a goal was sent while paused before the start"
            assert executor.resume() is True and not executor.held_before_start
        finally:
            gate.release.set()
            thread.join(60.0)
    assert not thread.is_alive()
    report = out["report"]
    assert report.status is ExecutionStatus.SUCCEEDED, report.summary()
    assert len(node.arms["left"].tickets) == 1 and len(node.arms["right"].tickets) == 1


def test_a_stop_after_a_pause_before_the_start_sends_nothing(tiny_sim, ros, tmp_path) -> None:
    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    gate = GateThatWaits()
    with MultiArmExecutor(config, context=ros.context, preflight=gate) as executor:
        thread, out = start(executor, plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]}))
        try:
            assert gate.entered.wait(30.0)
            assert executor.pause("operator pause") is True
            gate.release.set()
            time.sleep(1.5)
            assert executor.stop("operator stop") is True
            thread.join(60.0)
        finally:
            gate.release.set()
            thread.join(60.0)
    report = out["report"]
    assert report.status is ExecutionStatus.CANCELED, report.summary()
    assert all(r.status is ArmStatus.NOT_SENT for r in report.arms.values()), report.summary()
    assert node.arms["left"].tickets == [] and node.arms["right"].tickets == []


@pytest.mark.parametrize("limit", [0.5])
def test_a_pause_before_the_start_that_outlives_max_pause_sends_nothing(tiny_sim, ros, tmp_path,
                                                                       limit) -> None:
    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True, "max_pause_s": limit}).executor
    gate = GateThatWaits()
    with MultiArmExecutor(config, context=ros.context, preflight=gate) as executor:
        thread, out = start(executor, plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]}))
        try:
            assert gate.entered.wait(30.0)
            assert executor.pause("operator pause") is True
            gate.release.set()
            thread.join(60.0)
        finally:
            gate.release.set()
            thread.join(60.0)
    report = out["report"]
    assert report.status is ExecutionStatus.CANCELED, report.summary()
    assert "longer than execution.max_pause_s = 0.5 s: nothing was sent" in \
        report.first_failure.error_string
    assert node.arms["left"].tickets == [] and node.arms["right"].tickets == []
