"""control_msgs built from interfaces/control_msgs is wire-compatible with upstream (Kilted)."""

from __future__ import annotations

import pytest

from mj_manipulator_ros.ros.selfcheck import (
    EXPECTED_TYPE_HASHES, KILTED_TYPE_HASHES, installed_distro, type_hashes)

DISTRO = installed_distro()


@pytest.mark.parametrize("type_name", sorted(KILTED_TYPE_HASHES))
def test_type_hash_matches_upstream(type_name: str) -> None:
    assert type_hashes()[type_name] == EXPECTED_TYPE_HASHES[DISTRO][type_name], DISTRO


def test_result_constants() -> None:
    from control_msgs.action import FollowJointTrajectory

    r = FollowJointTrajectory.Result
    assert (r.SUCCESSFUL, r.INVALID_GOAL, r.INVALID_JOINTS, r.OLD_HEADER_TIMESTAMP,
            r.PATH_TOLERANCE_VIOLATED, r.GOAL_TOLERANCE_VIOLATED) == (0, -1, -2, -3, -4, -5)


def test_feedback_layout_of_the_distro() -> None:
    from control_msgs.action import FollowJointTrajectory

    fields = FollowJointTrajectory.Feedback.get_fields_and_field_types()
    if DISTRO == "jazzy":
        assert "index" not in fields and "multi_dof_index" not in fields
    else:
        assert fields["index"] == "int32" and fields["multi_dof_index"] == "int32"
    goal = FollowJointTrajectory.Goal.get_fields_and_field_types()
    assert list(goal) == ["trajectory", "multi_dof_trajectory", "path_tolerance",
                          "component_path_tolerance", "goal_tolerance",
                          "component_goal_tolerance", "goal_time_tolerance"]
