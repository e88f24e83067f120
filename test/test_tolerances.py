"""core/tolerances.py: a combined goal's tolerances split by the arm that owns each joint, renamed
for a driver, round-tripped through the control_msgs message, and the executor's per-joint rows.
(joint_trajectory_controller's resolution rules are tested through the simulated controller in
test_jtc_rows.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mj_manipulator_ros.core.errors import JointMismatchError
from mj_manipulator_ros.core.tolerances import (
    ERASE, GoalTolerances, JointTolerance, ToleranceDefaults, effective, joint_row, split)

OWNER = {"l1": "left", "l2": "left", "r1": "right"}


def test_split_gives_each_arm_its_joints_and_every_arm_the_goal_time() -> None:
    asked = GoalTolerances((JointTolerance("r1", 0.2), JointTolerance("l2", 0.1, 0.5)),
                           (JointTolerance("l1", 0.01),), goal_time=1.5)
    parts = split(asked, OWNER, ["left", "right"])
    assert [t.name for t in parts["left"].path] == ["l2"]
    assert [t.name for t in parts["left"].goal] == ["l1"]
    assert [t.name for t in parts["right"].path] == ["r1"] and parts["right"].goal == ()
    assert parts["left"].goal_time == parts["right"].goal_time == 1.5


def test_split_refuses_a_joint_of_no_arm_of_the_goal_by_name() -> None:
    asked = GoalTolerances(goal=(JointTolerance("elbow", 0.1),))
    with pytest.raises(JointMismatchError, match=r"goal_tolerance names joint 'elbow'.*'l1'"):
        split(asked, OWNER, ["left", "right"])
    # a joint of an arm the goal does not move is refused too
    with pytest.raises(JointMismatchError, match="'r1'"):
        split(GoalTolerances((JointTolerance("r1", 0.1),)), OWNER, ["left"])


def test_renamed_speaks_the_drivers_names_and_keeps_the_values() -> None:
    asked = GoalTolerances((JointTolerance("l1", 0.1, 0.2, 0.3),), (JointTolerance("l2", ERASE),),
                           goal_time=-1.0)
    wire = asked.renamed({"l1": "left/joint1"})
    assert wire.path == (JointTolerance("left/joint1", 0.1, 0.2, 0.3),)
    assert wire.goal == asked.goal and wire.goal_time == -1.0
    assert asked.renamed(None) == asked


def test_the_message_round_trip_keeps_every_field() -> None:
    from control_msgs.action import FollowJointTrajectory

    from mj_manipulator_ros.ros.conversion import fill_tolerances, goal_tolerances

    asked = GoalTolerances((JointTolerance("l1", 0.1, 0.2, 0.3),),
                           (JointTolerance("l2", ERASE, 0.0, 4.0),), goal_time=1.25)
    goal = FollowJointTrajectory.Goal()
    fill_tolerances(goal, asked, {"l2": "L2"})
    back = goal_tolerances(goal)
    assert back.path == asked.path
    assert back.goal == (JointTolerance("L2", ERASE, 0.0, 4.0),)
    assert back.goal_time == pytest.approx(1.25, abs=1e-9)


def test_effective_reverts_all_to_the_defaults_on_one_illegal_value() -> None:
    defaults = ToleranceDefaults(path_position=0.0, goal_position=0.05)
    ok, warning = effective(GoalTolerances((JointTolerance("a", 0.3),)), ["a", "b"], defaults)
    assert warning == "" and list(ok.path_position) == [0.3, math.inf]
    bad, warning = effective(GoalTolerances((JointTolerance("a", 0.3), JointTolerance("b", -0.5))),
                             ["a", "b"], defaults)
    assert "illegal position path tolerance -0.5 for joint 'b'" in warning
    assert np.all(np.isinf(bad.path_position)) and list(bad.goal_position) == [0.05, 0.05]


def test_joint_row_takes_a_joints_own_setting_over_the_default() -> None:
    row = joint_row({"b": 0.2}, 0.01, ["a", "b", "c"])
    assert row.shape == (3,) and list(row) == [0.01, 0.2, 0.01]
