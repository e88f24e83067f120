"""A starting configuration from a robot's MJCF (model/robot_finder.py, ``init-config``),
tried on models we did not write: the ALOHA of gym-aloha (PyPI), the OpenArm v2, and three
tiny arms composed inline."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import numpy as np
import yaml

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.model.robot_finder import find_robot
from mj_manipulator_ros.resources import config_file, resolve_model

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli", "init-config"]


def aloha() -> Path:
    """gym-aloha's bimanual ViperX scene (installed by make setup, without its dependencies)."""
    spec = importlib.util.find_spec("gym_aloha")
    assert spec is not None, "gym-aloha is not installed: run make setup"
    return Path(spec.origin).parent / "assets" / "bimanual_viperx_transfer_cube.xml"


def test_the_aloha_is_found_as_two_arms_with_grippers_on_its_table() -> None:
    robot = find_robot(aloha())
    assert [a.name for a in robot.arms] == ["left", "right"]
    for a in robot.arms:
        assert a.joints == tuple(f"vx300s_{a.name}/{j}" for j in (
            "waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate"))
        assert a.driver_names == ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle",
                                  "wrist_rotate")
        assert a.gripper_joints == (f"vx300s_{a.name}/left_finger",
                                    f"vx300s_{a.name}/right_finger")
        assert a.ready == (0.0, -0.96, 1.16, 0.0, -0.3, 0.0)      # its keyframe
    assert "table" in robot.own_ground and robot.ready_from == "keyframe '0'"


def test_the_openarm_is_found_as_our_own_configuration_has_it() -> None:
    """Against an independent reference: the hand-written OpenArm configuration's arms."""
    written = load_config(config_file("sim_openarm.yaml"))
    robot = find_robot(resolve_model("openarm:v2/pedestal/openarm_pedestal.xml"))
    assert {a.name: a.joints for a in robot.arms} == \
        {a.name: a.joint_names for a in written.arms}
    assert all(len(a.gripper_joints) == 1 for a in robot.arms)   # one driven finger each
    assert robot.own_ground == ""


def test_three_arms_composed_inline(tmp_path) -> None:
    """Three two-link arms on one base plate, a gripper of two fingers on the middle one."""
    def arm(n: str, x: float, fingers: bool = False) -> str:
        hand = (f'<body name="{n}_f1" pos="0.25 0 0"><joint name="{n}_f1" type="slide" '
                f'range="0 0.02"/><geom size="0.01"/></body><body name="{n}_f2" pos="0.25 0 0">'
                f'<joint name="{n}_f2" type="slide" range="0 0.02"/><geom size="0.01"/></body>'
                if fingers else "")
        return (f'<body name="robot_{n}_mount" pos="{x} 0 0.5"><body name="{n}_l1">'
                f'<joint name="{n}_j1" axis="0 0 1" range="-2 2"/><geom type="capsule" '
                f'fromto="0 0 0 0.3 0 0" size="0.03"/><body name="{n}_l2" pos="0.3 0 0">'
                f'<joint name="{n}_j2" axis="0 0 1" range="-2 2"/><geom type="capsule" '
                f'fromto="0 0 0 0.25 0 0" size="0.03"/>{hand}</body></body></body>')
    names = ("a", "b", "c")
    joints = [f"{n}_j{k}" for n in names for k in (1, 2)] + ["b_f1", "b_f2"]
    path = tmp_path / "three.xml"
    path.write_text("<mujoco><worldbody>" + arm("a", 0.0) + arm("b", 0.6, True) + arm("c", 1.2)
                    + "</worldbody><actuator>"
                    + "".join(f'<position joint="{j}" kp="100"/>' for j in joints)
                    + "</actuator></mujoco>")
    robot = find_robot(path)
    assert [a.name for a in robot.arms] == ["a", "b", "c"]
    assert [a.joints for a in robot.arms] == [(f"{n}_j1", f"{n}_j2") for n in names]
    assert [a.gripper_joints for a in robot.arms] == [(), ("b_f1", "b_f2"), ()]


def test_init_config_writes_a_configuration_that_loads_and_never_overwrites(tmp_path) -> None:
    out = tmp_path / "aloha.yaml"
    done = subprocess.run([*CLI, str(aloha()), "--out", str(out), "--driver-names"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "still to check" in done.stdout and "velocity limit" in done.stdout
    config = load_config_with_model(out)
    left = config.arm("left")
    assert left.wire_names[0] == "waist" and left.joint_names[0] == "vx300s_left/waist"
    assert left.joint_states_topic == "/left/joint_states"
    assert left.joint_limits["vx300s_left/waist"].velocity == 1.0
    assert yaml.safe_load(out.read_text())["scene"]["floor"] is False   # the table is its ground
    again = subprocess.run([*CLI, str(aloha()), "--out", str(out)], capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 2 and "exists: not overwritten" in again.stdout


@pytest.mark.parametrize("text, message", [
    ("<mujoco><worldbody><body><geom size='0.1'/></body></worldbody></mujoco>",
     "no joint has an actuator of its own"),
    ("<mujoco><worldbody>", "does not compile as MJCF"),
])
def test_a_model_without_arms_is_refused_by_name(tmp_path, text, message) -> None:
    model = tmp_path / "m.xml"
    model.write_text(text)
    done = subprocess.run([*CLI, str(model), "--out", str(tmp_path / "c.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stdout, done.stdout
    assert not (tmp_path / "c.yaml").exists()


def test_the_configuration_names_a_simulated_controller_that_can_drive_each_arm(tmp_path) -> None:
    """One arm with position servos, one with motors only: init-config writes the position
    controller for the first and the torque controller (its own torque drive) for the second,
    and the simulation builds and holds both (regression: no sim section, the default position
    controller refused the motor arm: 'has no position servo')."""
    from mj_manipulator_ros.sim.shared_model import SharedModel
    from mj_manipulator_ros.sim.sim_config import sim_config

    def arm(n: str, x: float) -> str:
        return (f'<body name="{n}_mount" pos="{x} 0 0.5"><body name="{n}_l1">'
                f'<joint name="{n}_j1" axis="0 0 1" range="-2 2" damping="1"/>'
                f'<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>'
                f'<body name="{n}_l2" pos="0.3 0 0"><joint name="{n}_j2" axis="0 0 1" '
                f'range="-2 2" damping="1"/><geom type="capsule" fromto="0 0 0 0.25 0 0" '
                f'size="0.03" mass="0.5"/></body></body></body>')
    model = tmp_path / "mixed.xml"
    model.write_text(
        "<mujoco><worldbody>" + arm("servo", 0.0) + arm("motor", 1.0) + "</worldbody><actuator>"
        + "".join(f'<position joint="servo_j{k}" kp="100" kv="5"/>' for k in (1, 2))
        + "".join(f'<motor joint="motor_j{k}" gear="1" ctrlrange="-50 50"/>' for k in (1, 2))
        + "</actuator></mujoco>")
    out = tmp_path / "mixed.yaml"
    done = subprocess.run([*CLI, str(model), "--out", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "simulated with the torque controller (motor_j1, motor_j2 without exactly one " \
        "position servo" in done.stdout, done.stdout
    written = yaml.safe_load(out.read_text())["sim"]["arms"]
    assert written == {"servo": {"controller": "position"}, "motor": {"controller": "torque"}}
    shared = SharedModel.from_config(sim_config(load_config_with_model(out)))
    start = shared.snapshot()
    for _ in range(250):   # half a second: every arm held where it started
        shared.step_cycle()
    end = shared.snapshot()
    for a in ("servo", "motor"):
        drift = np.max(np.abs(end.arms[a].positions - start.arms[a].positions))
        assert drift < 1e-3, (a, drift)
