"""Scene composition (OpenArm pair + UR5e), arm binding errors, the step check, and the
one-owner rule for MjData under concurrent access."""

from __future__ import annotations

import logging
import threading
import time

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.core.config import config_from_mapping, load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
from mj_manipulator_ros.model.step_caps import choose_step, step_caps
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import sim_config
from tiny_arm import tiny_config

UR5E = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
        "wrist_2_joint", "wrist_3_joint"]


def openarm_arm(side):
    return {"name": side, "joint_names": [f"openarm_{side}_joint{k}" for k in range(1, 8)]}


@pytest.mark.slow
def test_three_arms_from_two_packages() -> None:
    cfg = sim_config(config_from_mapping({
        "arms": [openarm_arm("left"), openarm_arm("right"),
                 {"name": "ur", "joint_names": [f"ur/{j}" for j in UR5E]}],
        "scene": {"models": [
            {"file": "openarm:v2/pedestal/openarm_pedestal.xml"},
            {"file": "ur5e:ur5e.xml", "prefix": "ur/", "pos": [1.2, 0.0, 0.0],
             "quat": [0.0, 0.0, 0.0, 1.0]}]},
    }))
    scene = cfg.build_scene()
    assert set(scene.arms) == {"left", "right", "ur"}
    ur = scene.arms["ur"]
    assert ur.joint_names == tuple(f"ur/{j}" for j in UR5E)
    servos = ur.position_servos()
    assert servos.kp[0] == 2000 and servos.kv[0] == 400  # general actuators with position-servo bias
    # The UR5e sits where its frame put it, rotated 180 degrees about z.
    data = scene.initial_data()
    base = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_BODY, "ur/base")
    assert np.allclose(data.xpos[base][:2], [1.2, 0.0], atol=1e-6)
    assert scene.model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC  # options set on the parent
    # Every body is attributed to exactly one arm (or none).
    assert not (scene.arms["left"].body_ids & scene.arms["ur"].body_ids)
    # The three arms can all be driven: one control cycle of each follower runs.
    shared = SharedModel(scene, cfg.sim)
    for _ in range(5):
        shared.step_cycle()


def test_missing_joint_names_arm_and_joint(tmp_path) -> None:
    cfg = tiny_config(tmp_path)
    bad = sim_config(config_from_mapping({
        "arms": [{"name": "left", "joint_names": ["left_j1", "left_elbow"]}],
        "scene": {"models": [m.__dict__ for m in cfg.scene.models], "floor": False}}))
    with pytest.raises(ConfigError, match=r"arm 'left': joint 'left_elbow' is not in the scene model"):
        bad.build_scene()


def test_unknown_model_scheme(tmp_path) -> None:
    bad = sim_config(config_from_mapping({
        "arms": [{"name": "a", "joint_names": ["x"]}],
        "scene": {"models": [{"file": "menagerie:franka/panda.xml"}]}}))
    with pytest.raises(ConfigError, match="unknown scheme 'menagerie'"):
        bad.build_scene()


def test_step_check_warns_and_auto_picks_a_stable_step(tmp_path, caplog) -> None:
    scene = tiny_config(tmp_path).build_scene()
    args = (scene.model, scene.arms.values(), scene.initial_qpos)
    servos = [c for c in step_caps(*args, 0.05) if c.cap == "servo"]
    assert not all(c.ok for c in servos)  # 50 ms is far too coarse for these servos
    with caplog.at_level(logging.WARNING):
        choice = choose_step(*args, 0.05, max_halvings=0)
    assert choice.timestep == 0.05 and "breaks the servo cap: joint left_j" in caplog.text
    dt = choose_step(*args, 0.05).timestep
    assert all(c.ok for c in step_caps(*args, dt))
    assert not all(c.ok for c in step_caps(*args, 2 * dt))


def test_openarm_config_loads_with_auto_timestep() -> None:
    scene = sim_config(load_config(config_file("sim_openarm.yaml"))).build_scene()
    assert scene.model.opt.timestep == pytest.approx(0.002)
    assert [a.name for a in scene.arms.values()] == ["left", "right"]


def test_shared_model_under_concurrent_access(tmp_path) -> None:
    """Physics thread running; readers, command writers and a replay on its own MjData hammer
    the shared model for 3 s: no crash, and every snapshot is self-consistent."""
    config = tiny_config(tmp_path, sim={"real_time_factor": 0.0})
    shared = SharedModel.from_config(config).start()
    stop = threading.Event()
    errors: list[BaseException] = []
    counts = {"reads": 0, "goals": 0, "replays": 0}

    def guarded(fn):
        def run():
            try:
                while not stop.is_set():
                    fn()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
        return threading.Thread(target=run)

    def reader():
        s = shared.snapshot()
        for arm in s.arms.values():
            assert np.all(np.isfinite(arm.positions)) and arm.positions.shape == (2,)
        t = shared.read(lambda m, d: float(d.time))
        assert t >= s.sim_time
        counts["reads"] += 1

    rng = np.random.default_rng(3)

    def commander():
        target = rng.uniform(-1, 1, size=2).round(3).tolist()
        req = GoalRequest(("left_j1", "left_j2"), [0.05], [target], [[]], [[]], 0.0)
        _, g = check_goal(req, ("left_j1", "left_j2"), shared.controller_time(),
                          config.sim.tolerances)
        shared.controllers["left"].submit(g)
        counts["goals"] += 1
        time.sleep(0.001)

    own = mujoco.MjData(shared.model)

    def replayer():
        own.qpos[:] = rng.uniform(-1, 1, size=shared.model.nq)
        mujoco.mj_kinematics(shared.model, own)
        mujoco.mj_collision(shared.model, own)
        counts["replays"] += 1

    threads = [guarded(reader), guarded(reader), guarded(commander), guarded(replayer)]
    for t in threads:
        t.start()
    time.sleep(3.0)
    stop.set()
    for t in threads:
        t.join(5.0)
    shared.stop()
    assert not errors, errors[:1]
    assert shared.error is None
    assert min(counts.values()) > 10, counts
    assert shared.cycles > 100
