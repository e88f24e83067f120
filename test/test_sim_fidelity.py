"""The simulator against the hardware it stands for: efforts that include the gravity load, force
limits that apply to it, command latency exact to the physics step, the scene that reproduces the
run."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.core.config import config_from_mapping, load_config
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import sim_config
from tiny_arm import tiny_config

# A 1 kg ball on a 0.5 m horizontal arm: gravity needs 4.9 N m; the servo may give 3 N m.
PENDULUM = """
<mujoco><worldbody><body name="link" pos="0 0 1">
  <joint name="j" axis="0 1 0" damping="0.2" armature="0.01"/>
  <geom type="sphere" pos="0.5 0 0" size="0.03" mass="1"/>
</body></worldbody>
<actuator><position joint="j" kp="300" kv="5" forcelimited="true" forcerange="-{limit} {limit}"/></actuator>
</mujoco>"""


def pendulum(tmp_path, gravity: str, limit: float = 3.0):
    path = tmp_path / "pendulum.xml"
    path.write_text(PENDULUM.format(limit=limit))
    return sim_config(config_from_mapping({
        "arms": [{"name": "arm", "joint_names": ["j"]}],
        "scene": {"models": [{"file": str(path)}], "floor": False},
        "sim": {"gravity_compensation": gravity, "real_time_factor": 0.0, "use_sim_time": True}}))


def hold(shared: SharedModel, seconds: float):
    for _ in range(int(seconds / shared.control_period)):
        shared.step_cycle()
    return shared.snapshot()


@pytest.fixture(scope="module")
def openarm():
    return sim_config(load_config(config_file("sim_openarm.yaml")))


def test_openarm_effort_is_the_gravity_torque_and_nothing_sags(openarm) -> None:
    shared = SharedModel.from_config(openarm)
    arm = shared.scene.arms["left"]
    start = shared.data.qpos[arm.qpos_adr].copy()
    snap = hold(shared, 2.0)
    # independent reference: inverse dynamics of the same pose at rest (no gravity compensation)
    m = shared.model
    d = mujoco.MjData(m)
    d.qpos[:] = shared.data.qpos
    mujoco.mj_forward(m, d)
    d.qacc[:] = 0.0
    plain = mujoco.MjModel.from_xml_string(shared.scene.xml().replace('gravcomp="1"', ""))
    dp = mujoco.MjData(plain)
    dp.qpos[:] = shared.data.qpos
    mujoco.mj_inverse(plain, dp)
    gravity_j1 = dp.qfrc_inverse[arm.dof_adr[0]] - dp.qfrc_passive[arm.dof_adr[0]]
    effort_j1 = snap.arms["left"].efforts[0]
    assert abs(gravity_j1) > 1.0  # the test is only meaningful under load
    assert effort_j1 == pytest.approx(gravity_j1, rel=0.03)
    assert np.max(np.abs(snap.arms["left"].positions - start)) < 1e-4  # < 0.1 mrad of sag


def test_gravity_beyond_the_force_range_saturates_visibly(tmp_path) -> None:
    """Actuator gravity compensation shares the servo's 3 N m: the arm sags with the effort at
    the limit. Body gravity compensation (today's mode) holds it for free."""
    shared = SharedModel.from_config(pendulum(tmp_path, "actuator"))
    snap = hold(shared, 1.0)
    effort, angle = snap.arms["arm"].efforts[0], snap.arms["arm"].positions[0]
    assert abs(effort) == pytest.approx(3.0, abs=1e-6)
    assert abs(angle) > 0.05  # visibly sagging (rad)
    free = SharedModel.from_config(pendulum(tmp_path, "body"))
    snap = hold(free, 1.0)
    assert abs(snap.arms["arm"].positions[0]) < 1e-4
    assert abs(snap.arms["arm"].efforts[0]) < 0.01  # the weight is not in the effort


def test_gravity_within_the_force_range_is_held(tmp_path) -> None:
    shared = SharedModel.from_config(pendulum(tmp_path, "actuator", limit=10.0))
    snap = hold(shared, 1.0)
    assert abs(snap.arms["arm"].positions[0]) < 1e-4
    assert abs(snap.arms["arm"].efforts[0]) == pytest.approx(0.5 * 9.81, rel=0.01)


@pytest.mark.parametrize("latency", [0.0105, 0.02])
def test_command_latency_is_exact_to_the_physics_step(tmp_path, latency) -> None:
    """A step in one arm's command reaches its actuator ``latency`` later, to within one
    physics step; the other arm's at the next step."""
    cfg = tiny_config(tmp_path, sim={"faults": {"left": {"command_latency_s": latency}}})
    scene = cfg.build_scene()
    m, d = scene.model, scene.initial_data()
    dt = m.opt.timestep
    left, right = (scene.arms[a].actuators[0][0].id for a in ("left", "right"))
    for _ in range(20):
        mujoco.mj_step(m, d)
    t_cmd = d.time
    d.ctrl[left] += 0.2
    d.ctrl[right] += 0.2
    seen = {}
    while d.time < t_cmd + latency + 10 * dt:
        mujoco.mj_step(m, d)
        for name, a in (("left", left), ("right", right)):
            if name not in seen and abs(d.actuator_force[a]) > 0.5 * 150 * 0.2:
                seen[name] = d.time - dt  # the step that computed the force started here
    assert seen["right"] - t_cmd == pytest.approx(0.0, abs=dt + 1e-12)
    assert latency - 1e-12 <= seen["left"] - t_cmd <= latency + dt + 1e-12


def test_delayed_arm_holds_its_start_pose_before_any_command(tmp_path) -> None:
    """The delay buffer starts full of the holding command (not zeros): nothing moves."""
    cfg = tiny_config(tmp_path, sim={"faults": {"left": {"command_latency_s": 0.05}}})
    cfg = dataclasses.replace(cfg, scene=dataclasses.replace(
        cfg.scene, initial_positions={"left_j1": 0.7, "left_j2": -0.4}))
    shared = SharedModel.from_config(cfg)
    snap = hold(shared, 0.2)
    assert snap.arms["left"].positions == pytest.approx([0.7, -0.4], abs=1e-4)


def test_scene_xml_reproduces_the_model(openarm, tmp_path) -> None:
    """The saved scene loads from another folder and steps the same as the running model."""
    cfg = dataclasses.replace(openarm, sim=dataclasses.replace(openarm.sim, control_rate_hz=100),
                              scene=dataclasses.replace(openarm.scene, timestep=0.0025))
    scene = cfg.build_scene()
    info = scene.save(tmp_path / "scene.xml")
    assert info["physics_step"]["timestep_s"] == 0.0025 and info["scene_xml"] == "scene.xml"
    other = mujoco.MjModel.from_xml_path(str(tmp_path / "scene.xml"))
    assert other.opt.timestep == pytest.approx(0.0025)
    assert (other.nq, other.nu, other.ngeom, other.nmesh) == (scene.model.nq, scene.model.nu,
                                                              scene.model.ngeom, scene.model.nmesh)
    assert other.jnt_actgravcomp.sum() == scene.model.jnt_actgravcomp.sum() == 14
    d1, d2 = scene.initial_data(), mujoco.MjData(other)
    d2.qpos[:], d2.ctrl[:] = d1.qpos, d1.ctrl
    d1.ctrl[:7] += 0.3
    d2.ctrl[:7] += 0.3
    for _ in range(200):
        mujoco.mj_step(scene.model, d1)
        mujoco.mj_step(other, d2)
    assert np.max(np.abs(d1.qpos - d2.qpos)) < 1e-9
    assert np.max(np.abs(d1.qpos - scene.initial_qpos)) > 0.05  # it did move


def test_unserved_arms_are_ghosts(tmp_path, ros) -> None:
    """With --serve, the other arms are another host's: they keep their start pose here, so they
    must not collide with the served arm (regression: the crossing plan run by one process per
    arm hit the peer's stale pose and aborted on tracking error)."""
    from mj_manipulator_ros.sim.sim_node import SimNode

    cfg = tiny_config(tmp_path, separation=0.3)
    whole = cfg.build_scene().model
    node = SimNode(cfg, context=ros.context, serve=["left"])
    try:
        m = node.scene.model
        right = np.isin(m.geom_bodyid, list(node.scene.arms["right"].body_ids))
        left = np.isin(m.geom_bodyid, list(node.scene.arms["left"].body_ids))
        assert right.any() and not m.geom_contype[right].any() and not m.geom_conaffinity[right].any()
        assert (m.geom_contype[left] == whole.geom_contype[left]).all() and m.geom_contype[left].any()
    finally:
        node.close()
