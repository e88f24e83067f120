"""control_msgs built from interfaces/control_msgs is wire-compatible with upstream (Kilted)."""

from __future__ import annotations

import pytest

from mj_manipulator_ros.ros.selfcheck import KILTED_TYPE_HASHES, type_hashes


@pytest.mark.parametrize("type_name", sorted(KILTED_TYPE_HASHES))
def test_type_hash_matches_upstream(type_name: str) -> None:
    assert type_hashes()[type_name] == KILTED_TYPE_HASHES[type_name]


def test_result_constants() -> None:
    from control_msgs.action import FollowJointTrajectory

    r = FollowJointTrajectory.Result
    assert (r.SUCCESSFUL, r.INVALID_GOAL, r.INVALID_JOINTS, r.OLD_HEADER_TIMESTAMP,
            r.PATH_TOLERANCE_VIOLATED, r.GOAL_TOLERANCE_VIOLATED) == (0, -1, -2, -3, -4, -5)


def test_kilted_feedback_layout() -> None:
    from control_msgs.action import FollowJointTrajectory

    fields = FollowJointTrajectory.Feedback.get_fields_and_field_types()
    assert fields["index"] == "int32" and fields["multi_dof_index"] == "int32"
    goal = FollowJointTrajectory.Goal.get_fields_and_field_types()
    assert list(goal) == ["trajectory", "multi_dof_trajectory", "path_tolerance",
                          "component_path_tolerance", "goal_tolerance",
                          "component_goal_tolerance", "goal_time_tolerance"]
