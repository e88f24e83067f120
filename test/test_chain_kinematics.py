"""ChainKinematics against mj_kinematics (the reference): the OpenArm's hands at random
configurations, and a tiny model with every joint kind on the chain."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.chain_kinematics import ChainKinematics
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file

#: a chain with a free base, a slide, a ball and a hinge not driven (each at qpos0, a hinge's
#: qpos0 its ref), offset joints and turned bodies; then two driven hinges and a slide
TINY = """
<mujoco>
  <worldbody>
    <body name="base" pos="0.1 0.2 0.3" quat="0.9 0.1 0.3 0.2">
      <freejoint/>
      <geom size="0.05"/>
      <body name="rail" pos="0 0 0.1">
        <joint name="rail" type="slide" axis="1 1 0" ref="0.05"/>
        <joint name="passive" type="hinge" axis="0 1 0" ref="0.4" pos="0.02 0 0"/>
        <geom size="0.03"/>
        <body name="cup" pos="0.1 0 0" quat="0.7 0.7 0 0">
          <joint name="ball" type="ball" pos="0 0.03 0"/>
          <geom size="0.03"/>
          <body name="upper" pos="0 0 0.2" quat="0.5 0.5 0.5 0.5">
            <joint name="j1" axis="0 0.6 0.8" pos="0.01 -0.02 0.03" ref="0.3"/>
            <geom size="0.03"/>
            <body name="lower" pos="0.2 0 0">
              <joint name="j2" axis="1 0 0"/>
              <joint name="reach" type="slide" axis="0 0 1" pos="0 0.1 0" ref="0.02"/>
              <geom size="0.02"/>
              <body name="hand" pos="0 0.05 0.1" quat="0.2 0.9 0.1 0.3">
                <geom size="0.02"/>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _reference(model, body, adr, q):
    """mj_kinematics, one configuration at a time (every other joint at qpos0)."""
    data = mujoco.MjData(model)
    out = np.empty((q.shape[0], 3))
    for i, row in enumerate(q):
        data.qpos[:] = model.qpos0
        data.qpos[adr] = row
        mujoco.mj_kinematics(model, data)
        out[i] = data.xpos[body]
    return out


def test_the_openarm_hands_match_mj_kinematics_at_random_configurations() -> None:
    scene = scene_for(load_config_with_model(str(config_file("openarm_bimanual.yaml"))))
    model = scene.model
    rng = np.random.default_rng(3)
    for arm, binding in scene.arms.items():
        adr = np.asarray(binding.qpos_adr)
        body = int(model.jnt_bodyid[binding.joint_ids[-1]])
        lo, hi = model.jnt_range[list(binding.joint_ids)].T
        q = rng.uniform(lo, hi, size=(200, adr.size))
        got = ChainKinematics(model, body, adr).positions(q)
        want = _reference(model, body, adr, q)
        assert np.abs(got - want).max() < 1e-12, arm
        assert np.ptp(want, axis=0).max() > 0.2   # the configurations move the hand


def test_every_joint_kind_on_the_chain_matches_mj_kinematics() -> None:
    model = mujoco.MjModel.from_xml_string(TINY)
    hand = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "hand")
    adr = [int(model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)])
           for n in ("reach", "j1", "j2")]        # not in the model's order
    q = np.random.default_rng(4).uniform(-2.0, 2.0, size=(100, 3))
    got = ChainKinematics(model, hand, adr).positions(q)
    assert np.abs(got - _reference(model, hand, adr, q)).max() < 1e-12


def test_a_joint_that_is_not_one_number_or_not_on_the_chain_is_refused_by_name() -> None:
    model = mujoco.MjModel.from_xml_string(TINY)
    body = {n: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in ("hand", "upper")}
    adr = {n: int(model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)])
           for n in ("ball", "j2")}
    with pytest.raises(ConfigError, match="joint 'ball'.*hinges or slides"):
        ChainKinematics(model, body["hand"], [adr["ball"]])
    with pytest.raises(ConfigError, match=rf"\[{adr['j2']}\].*body 'upper'"):
        ChainKinematics(model, body["upper"], [adr["j2"]])


def test_the_hands_paths_along_a_plan_are_mj_kinematics_paths() -> None:
    """check/stop_distances.cumulative_paths (the stop envelope's hand paths) against the hands
    placed by mj_kinematics with every arm's joints set together, on the crossing plan."""
    from mj_manipulator_ros.check.stop_distances import cumulative_paths
    from mj_manipulator_ros.core.interpolation import sample
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.resources import share_dir

    scene = scene_for(load_config_with_model(str(config_file("openarm_bimanual.yaml"))))
    model, data = scene.model, mujoco.MjData(scene.model)
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    grid = np.arange(0.0, plan.duration, 0.01)
    _joints, hand_cum, hand = cumulative_paths(plan, scene, grid)
    bodies = {a: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, hand[a]) for a in hand}
    xyz = {a: np.empty((grid.size, 3)) for a in hand}
    data.qpos[:] = model.qpos0
    for i, t in enumerate(grid):
        for arm, traj in plan.arms.items():
            binding = scene.arms[arm]
            cols = [list(binding.joint_names).index(j) for j in traj.joint_names]
            data.qpos[np.asarray(binding.qpos_adr)[cols]] = sample(traj, np.array([t]))[0][0]
        mujoco.mj_kinematics(model, data)
        for arm, body in bodies.items():
            xyz[arm][i] = data.xpos[body]
    for arm, p in xyz.items():
        want = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))])
        assert want[-1] > 0.5, arm   # the plan moves the hand
        assert np.abs(hand_cum[arm] - want).max() < 1e-9, arm
