"""The emulated operator's eye (hil/pose_picture.py): which joint a picture and the robot
differ from, on the OpenArm pair, against poses changed one joint at a time (ROS-free)."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.hil.pose_picture import BodyPlaces
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.sim_config import sim_config


@pytest.fixture(scope="module")
def scene():
    return sim_config(load_config(config_file("sim_openarm.yaml"))).build_scene()


def poses(scene) -> dict[str, np.ndarray]:
    return {n: scene.initial_qpos[np.asarray(a.qpos_adr)].copy() for n, a in scene.arms.items()}


@pytest.mark.parametrize("arm", ["left", "right"])
@pytest.mark.parametrize("joint", range(7))
def test_the_first_joint_off_is_named(scene, arm, joint) -> None:
    """Each joint turned 0.1 rad in the robot, not in the picture: that joint is named; the
    bodies before it are where the picture has them."""
    shown = poses(scene)
    seen = {a: q.copy() for a, q in shown.items()}
    seen[arm][joint] += 0.1
    places = BodyPlaces(scene)
    moved, turned, first = places.first_difference(seen, shown)
    assert first == f"{arm} {scene.arms[arm].joint_names[joint]}", first
    assert turned == pytest.approx(0.1, abs=1e-6)      # the joint's own body turns by it


def test_the_same_pose_is_the_same(scene) -> None:
    p = poses(scene)
    moved, turned, first = BodyPlaces(scene).first_difference(p, {a: q.copy() for a, q in p.items()})
    assert moved < 1e-12 and turned < 1e-6 and first == ""


def test_a_sign_flip_at_a_joints_zero_is_invisible_and_off_it_is_not(scene) -> None:
    """Why the jog shows the picture at the jogged pose: a reversed joint standing at 0 looks
    right; 0.1 rad away it is 0.2 rad off."""
    shown = poses(scene)
    j = 4
    assert shown["left"][j] == 0.0
    seen = {a: q.copy() for a, q in shown.items()}
    seen["left"][j] = -shown["left"][j]
    assert BodyPlaces(scene).first_difference(seen, shown)[2] == ""
    shown["left"][j], seen["left"][j] = 0.1, -0.1
    moved, turned, first = BodyPlaces(scene).first_difference(seen, shown)
    assert first.endswith("joint5") and turned == pytest.approx(0.2, abs=1e-6)
