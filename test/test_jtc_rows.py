"""The simulated controller against joint_trajectory_controller's rows (goal checks, tolerance
resolution, feedback), one test per row; deliberate differences are tested as such and listed
in docs/simulator.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mj_manipulator_ros.core.tolerances import JointTolerance, ToleranceDefaults
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal

J = ("a", "b")
D = ToleranceDefaults(path_position=0.2, goal_position=0.05, goal_time=1.0)


def req(**kw) -> GoalRequest:
    base = dict(joint_names=J, times=[0.5, 1.0], positions=[[0.1, 0.2], [0.3, 0.4]],
                velocities=[[], []], accelerations=[[], []], stamp_s=0.0)
    return GoalRequest(**{**base, **kw})


def accepted(r: GoalRequest, now=0.0, **kw):
    reason, goal = check_goal(r, J, now, D, **kw)
    assert reason is None, reason
    return goal


def rejected(r: GoalRequest, now=0.0, **kw) -> str:
    reason, goal = check_goal(r, J, now, D, **kw)
    assert reason is not None and goal is None
    return reason


def test_defaults_include_the_stopped_velocity_tolerance() -> None:
    g = accepted(req())
    assert list(g.tolerances.goal_velocity) == [0.01, 0.01]  # JTC's stopped_velocity_tolerance
    assert list(g.tolerances.path_position) == [0.2, 0.2] and g.tolerances.goal_time == 1.0
    assert math.isinf(g.tolerances.path_velocity[0])  # a default of 0 is unchecked


def test_minus_one_erases_zero_keeps_the_default_positive_sets() -> None:
    g = accepted(req(path_tolerance=(JointTolerance("a", position=-1.0),
                                     JointTolerance("b", position=0.3)),
                     goal_tolerance=(JointTolerance("b", position=0.0, velocity=-1.0),),
                     goal_time_tolerance=-1.0))
    assert math.isinf(g.tolerances.path_position[0]) and g.tolerances.path_position[1] == 0.3
    assert g.tolerances.goal_position[1] == 0.05 and math.isinf(g.tolerances.goal_velocity[1])
    assert math.isinf(g.tolerances.goal_time) and g.tolerance_warning == ""


@pytest.mark.parametrize("bad, words", [
    (dict(path_tolerance=(JointTolerance("a", position=0.3), JointTolerance("b", position=-0.5))),
     "illegal position path tolerance -0.5"),
    (dict(goal_tolerance=(JointTolerance("elbow", position=0.3),)), "unknown joint 'elbow'"),
    (dict(goal_tolerance=(JointTolerance("a", acceleration=-2.0),)), "illegal acceleration"),
    (dict(path_tolerance=(JointTolerance("a", position=0.3),), goal_time_tolerance=-0.5),
     "illegal goal_time_tolerance"),
])
def test_an_illegal_or_unknown_tolerance_reverts_every_tolerance_to_the_defaults(bad, words) -> None:
    """As JTC: not only the offending entry; the goal is still accepted."""
    g = accepted(req(**bad))
    assert words in g.tolerance_warning
    assert list(g.tolerances.path_position) == [0.2, 0.2]  # the legal 0.3 is reverted too
    assert g.tolerances.goal_time == 1.0


def test_rejections_like_jtc() -> None:
    assert "empty joint names" in rejected(req(joint_names=(), positions=[[], []]),
                                           allow_partial=True)
    assert "effort" in rejected(req(efforts=[[1.0, 1.0], [0.0, 0.0]]))
    assert "ends in the past" in rejected(req(stamp_s=10.0), now=20.0)
    assert "not strictly increasing" in rejected(req(times=[0.5, 0.5]))


def test_a_negative_first_time_is_accepted_like_jtc() -> None:
    g = accepted(req(times=[-0.2, 1.0]))
    assert g.trajectory.times[0] == -0.2


def test_an_accepted_goal_is_not_rechecked_against_the_clock() -> None:
    """JTC checks 'ends in the past' when the goal arrives only (now=None at execution)."""
    accepted(req(stamp_s=10.0), now=None)


def test_deliberate_differences_are_refused() -> None:
    """docs/simulator.md: duplicates, non-finite values and per-point mixed splines are
    refused here (JTC takes them)."""
    assert "duplicate" in rejected(req(joint_names=("a", "a")))
    assert "non-finite" in rejected(req(positions=[[0.1, np.nan], [0.3, 0.4]]))
    assert "only some points" in rejected(req(velocities=[[0.1, 0.1], []]))
