"""The motion's phases (core/execution_phase.py, its second table): one table of legal transitions, enforced; an
illegal transition is a named error, never a silent ignore."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mj_manipulator_ros.core.errors import IllegalTransitionError
from mj_manipulator_ros.core.execution_phase import MOTION_TRANSITIONS as TRANSITIONS, MotionPhase, motion_transition as transition
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_speed import PlanSpeed
from tiny_arm import tiny_config

#: the transitions the executor's behaviour needs, written out independently of the table
EXPECTED = {("idle", "running"), ("running", "paused"), ("running", "stopping"),
            ("paused", "running"), ("paused", "stopping"), ("running", "idle"),
            ("paused", "idle"), ("stopping", "idle")}


@pytest.mark.parametrize("current,wanted", list(itertools.product(MotionPhase, MotionPhase)))
def test_every_pair_of_phases_is_legal_exactly_when_the_table_says(current, wanted) -> None:
    if (current.value, wanted.value) in EXPECTED:
        assert transition(current, wanted, "test") is wanted
        return
    with pytest.raises(IllegalTransitionError) as caught:
        transition(current, wanted, "a test's request")
    text = str(caught.value)
    assert f"from {current.value} to {wanted.value}" in text and "a test's request" in text
    for (a, b) in TRANSITIONS:   # it says what the current phase allows
        if a is current:
            assert b.value in text.split("; from ")[1], text


def test_the_table_is_the_expected_one() -> None:
    assert {(a.value, b.value) for a, b in TRANSITIONS} == EXPECTED


def test_a_second_start_without_an_end_is_refused_by_name(tmp_path) -> None:
    """Regression: begin() on a running motion overwrote it silently."""
    config = tiny_config(tmp_path).executor
    t = np.linspace(0.0, 1.0, 11)
    plan = MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.zeros((11, 2)))
                         for a in ("left", "right")})
    speed = PlanSpeed(config, now_ns=lambda: 0, check_resume=lambda _plan: None)
    assert speed.state is MotionPhase.IDLE and speed.state == "idle"   # str-valued
    speed.begin(plan, {}, None, None, 1.0)
    assert speed.state is MotionPhase.RUNNING
    with pytest.raises(IllegalTransitionError, match="from running to running"):
        speed.begin(plan, {}, None, None, 2.0)
    speed.end()
    speed.end()   # ending what has ended is no transition
    assert speed.state is MotionPhase.IDLE
