"""The one travel rule (core/joint_path.py) against hand-computed paths."""

import numpy as np
import pytest

from mj_manipulator_ros.core.joint_path import cumulative_joint_paths, joint_travel


def test_a_joint_that_turns_back_counts_both_ways_and_the_largest_joint_decides() -> None:
    # joint 0: 0 -> 1 -> 0.5 (1.5 rad of path, 0.5 between the ends); joint 1: 0 -> -0.2 -> -1.2
    poses = np.array([[0.0, 0.0], [1.0, -0.2], [0.5, -1.2]])
    assert joint_travel(poses) == pytest.approx(1.5)
    np.testing.assert_allclose(cumulative_joint_paths(poses),
                               [[0.0, 0.0], [1.0, 0.2], [1.5, 1.2]])


def test_one_pose_travels_nothing_and_a_bad_shape_is_named() -> None:
    assert joint_travel(np.zeros((1, 7))) == 0.0
    with pytest.raises(ValueError, match=r"\(N, J\), got shape \(3,\)"):
        joint_travel(np.zeros(3))
