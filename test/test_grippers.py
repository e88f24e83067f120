"""Gripper joints (``arms[].gripper_joints``): joints an arm carries that plans do not command.
Every check stands them where they are measured, and the allowed-collision matrix proves its
pairs over their whole range, so an open gripper is checked as it is. The reference is
MuJoCo's own distance on a fresh copy of the model, posed by hand."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.check.preflight import scene_checker
from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.errors import ConfigError, JointLimitError
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.model.allowed_collisions import AllowReason

#: a two-link arm along +x whose hand carries a finger sliding out along x (0-100 mm); a box
#: 40 mm beyond the closed finger's tip when the arm points at it (j1 = j2 = 0)
ROBOT_XML = """
<mujoco model="arm_with_finger">
  <compiler angle="radian"/>
  <worldbody>
    <body name="link1" pos="0 0 0.5">
      <joint name="j1" axis="0 0 1" range="-2 2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="j2" axis="0 0 1" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.03"/>
        <body name="finger" pos="0.25 0 0">
          <joint name="f" type="slide" axis="1 0 0" range="0 0.1"/>
          <geom name="tip" type="sphere" size="0.02" pos="0.02 0 0"/>
        </body>
      </body>
    </body>
    <body name="obstacle" pos="0.665 0 0.5">
      <geom name="box" type="box" size="0.035 0.05 0.05"/>
    </body>
  </worldbody>
  <actuator>
    <position joint="j1" kp="100"/><position joint="j2" kp="100"/>
    <position joint="f" kp="100"/>
  </actuator>
</mujoco>
"""


def config(tmp_path, gripper: bool = True):
    path = tmp_path / "robot.xml"
    path.write_text(ROBOT_XML)
    arm = {"name": "arm", "joint_names": ["j1", "j2"],
           "joint_limits": {"j1": {"lower": -2, "upper": 2, "velocity": 2},
                            "j2": {"lower": -2, "upper": 2, "velocity": 2}}}
    if gripper:
        arm["gripper_joints"] = ["f"]
    return config_from_mapping({"arms": [arm], "scene": {
        "models": [{"file": str(path)}], "floor": False}})


def swing_through_the_box() -> MultiArmPlan:
    """From j1 = 0.8 to 0 (pointing at the box) and back, over 2 s."""
    t = np.linspace(0.0, 2.0, 41)
    j1 = 0.8 * (1 - np.sin(np.pi * t / 2.0) ** 2)
    return MultiArmPlan({"arm": ArmTrajectory(("j1", "j2"), t,
                                              np.column_stack([j1, np.zeros_like(t)]))})


def reference_distance(finger: float) -> float:
    """The finger's distance to the box with the arm pointing at it (the plan's closest state),
    from MuJoCo on a fresh model."""
    model = mujoco.MjModel.from_xml_string(ROBOT_XML)
    data = mujoco.MjData(model)
    data.qpos[model.joint("f").qposadr[0]] = finger
    mujoco.mj_kinematics(model, data)
    return mujoco.mj_geomDistance(model, data, model.geom("tip").id, model.geom("box").id,
                                  1.0, None)


def test_without_gripper_joints_the_matrix_proves_the_closed_finger_away(tmp_path) -> None:
    """The hazard: with the finger left out of the arm, the matrix proves the finger and the
    box never within the margin (over the arm's joints, the finger at the reference pose) and
    skips the pair: a real gripper standing open would never be checked."""
    checker = scene_checker(config(tmp_path, gripper=False))
    reasons = {frozenset(p.bodies): p.reason for p in checker.allowed.pairs}
    assert reasons.get(frozenset(("finger", "obstacle"))) is AllowReason.NEVER, reasons


@pytest.mark.parametrize("finger", [0.0, 0.02, 0.03, 0.04, 0.06, 0.1])
def test_the_plan_is_checked_with_the_finger_where_it_stands(tmp_path, finger) -> None:
    """Declared as a gripper joint: the pair stays checked (its distance depends on three
    joints), and the verdict at each finger position is the reference's."""
    checker = scene_checker(config(tmp_path))
    reasons = {frozenset(p.bodies): p.reason for p in checker.allowed.pairs}
    assert frozenset(("finger", "obstacle")) not in reasons, reasons
    report = checker.check(swing_through_the_box(), grippers={"f": finger})
    expected_clear = reference_distance(finger) >= checker.margin
    assert report.collision_free == expected_clear, (finger, reference_distance(finger),
                                                      report.summary())
    assert report.grippers == {"f": pytest.approx(finger)}
    if not expected_clear:
        assert any({"finger", "obstacle"} == set(p.bodies) for p in report.pairs), report.summary()


def test_a_finger_outside_its_range_or_unknown_is_refused_by_name(tmp_path) -> None:
    checker = scene_checker(config(tmp_path))
    with pytest.raises(JointLimitError, match=r"gripper joint 'f' stands at 0\.2000, outside"):
        checker.check(swing_through_the_box(), grippers={"f": 0.2})
    with pytest.raises(JointLimitError, match="'f' stands at nan"):
        checker.check(swing_through_the_box(), grippers={"f": float("nan")})
    with pytest.raises(ValueError, match=r"\['g'\]: not a gripper joint of any arm; the "
                                         r"gripper joints are \['f'\]"):
        checker.check(swing_through_the_box(), grippers={"g": 0.0})
    # and the checker is back at the reference pose afterwards
    assert checker.check(swing_through_the_box()).grippers == {"f": 0.0}


def test_a_gripper_joint_must_ride_on_its_arm_and_have_a_range(tmp_path) -> None:
    from mj_manipulator_ros.model.scene import scene_for
    bad = ROBOT_XML.replace('range="0 0.1"', "").replace(
        '<body name="obstacle" pos="0.665 0 0.5">',
        '<body name="obstacle" pos="0.665 0 0.5"><joint name="loose" type="slide" '
        'range="0 1"/>')
    path = tmp_path / "robot.xml"
    path.write_text(bad)
    for joint, message in (("f", "gripper joint 'f' has no range"),
                           ("loose", "moves body 'obstacle', which the arm's joints")):
        c = config_from_mapping({"arms": [{"name": "arm", "joint_names": ["j1", "j2"],
                                           "gripper_joints": [joint]}],
                                 "scene": {"models": [{"file": str(path)}], "floor": False}})
        with pytest.raises(ConfigError, match=message):
            scene_for(c)


def test_the_pre_flight_checks_the_gripper_where_the_driver_reports_it(ros, tmp_path) -> None:
    """End to end, through the simulator's joint states (the finger under its driver's name,
    on the arm's own topic): with the real finger standing open (100 mm out; the model's
    reference pose has it closed), the swing into the box is refused before anything moves,
    naming the finger and the box; with the finger closed, the same plan runs."""
    from mj_manipulator_ros.check.preflight import PlanRefused, preflight_for
    from mj_manipulator_ros.ros.executor import MultiArmExecutor
    from mj_manipulator_ros.sim.sim_config import sim_config
    from mj_manipulator_ros.sim.sim_node import SimNode

    path = tmp_path / "robot.xml"
    path.write_text(ROBOT_XML.replace('kp="100"/>', 'kp="100" kv="5"/>'))

    def mapping(finger: float) -> dict:
        return {"arms": [{"name": "arm", "joint_names": ["j1", "j2"],
                          "joint_limits": {"j1": {"lower": -2, "upper": 2, "velocity": 2},
                                           "j2": {"lower": -2, "upper": 2, "velocity": 2}},
                          "gripper_joints": ["f"], "gripper_driver_joint_names": ["finger"],
                          "joint_states_topic": "/arm/joint_states"}],
                "execution": {"use_sim_time": True, "server_wait_s": 10.0},
                "scene": {"models": [{"file": str(path)}], "floor": False,
                          "initial_positions": {"j1": 0.8, "f": finger}},
                "sim": {"real_time_factor": 1.0, "use_sim_time": True}}

    config = config_from_mapping(mapping(0.0))   # the checks' reference: the finger closed
    plan = swing_through_the_box()
    for finger, refused in ((0.1, True), (0.0, False)):
        sim = SimNode(sim_config(config_from_mapping(mapping(finger))),
                      context=ros.context).start()
        try:
            with MultiArmExecutor(config, context=ros.context,
                                  preflight=preflight_for(config)) as executor:
                if refused:
                    with pytest.raises(PlanRefused) as caught:
                        executor.execute(plan)
                    text = str(caught.value)
                    assert "obstacle x arm/finger" in text, text
                    assert "f 0.1000" in text, text   # where the check stood the finger
                    assert sim.arms["arm"].tickets == [], "a goal reached the arm"
                else:
                    report = executor.execute(plan)
                    assert report.succeeded, report.summary()
        finally:
            sim.close()


def test_two_fingers_touching_each_other_are_the_grippers_own_contact(tmp_path) -> None:
    """A second finger beside the first, touching it when both are closed: their distance
    depends on the two gripper joints only, which no plan commands; the pair is allowed as
    ``gripper`` (not refused in every plan), while each finger and the box stay checked."""
    xml = ROBOT_XML.replace(
        '<geom name="tip" type="sphere" size="0.02" pos="0.02 0 0"/>\n        </body>',
        '<geom name="tip" type="sphere" size="0.02" pos="0.02 0 0"/>\n        </body>\n'
        '        <body name="finger2" pos="0.25 0 0"><joint name="g" type="slide" axis="0 1 0" '
        'range="0 0.05"/><geom type="sphere" size="0.02" pos="0.02 0.04 0"/></body>')
    assert "finger2" in xml
    path = tmp_path / "robot.xml"
    path.write_text(xml)
    cfg = config_from_mapping({"arms": [{"name": "arm", "joint_names": ["j1", "j2"],
                                         "gripper_joints": ["f", "g"]}],
                               "scene": {"models": [{"file": str(path)}], "floor": False}})
    checker = scene_checker(cfg)
    reasons = {frozenset(p.bodies): p for p in checker.allowed.pairs}
    pair = reasons.get(frozenset(("finger", "finger2")))
    assert pair is not None and pair.reason is AllowReason.GRIPPER, reasons
    assert set(pair.joints) == {"f", "g"}
    for finger in ("finger", "finger2"):
        assert frozenset((finger, "obstacle")) not in reasons
    report = checker.check(swing_through_the_box(), grippers={"f": 0.0, "g": 0.0})
    assert report.collision_free, report.summary()   # the fingers touch (0 mm): not counted


def test_check_plan_stands_a_left_out_arm_still_as_the_pre_flight_does(tmp_path) -> None:
    """A plan over one of two arms: check-plan replays it with the other arm standing at the
    reference pose and says so (regression: it refused the plan, "no poses for arm(s)", while
    the pre-flight holds a left-out arm where it is measured); a finger given on the command
    line is checked where it says."""
    import subprocess
    import sys

    import yaml

    from mj_manipulator_ros.core.plan_io import save_plan

    path = tmp_path / "robot.xml"
    path.write_text(ROBOT_XML)
    second = ROBOT_XML.replace('name="', 'name="b_').replace('joint="', 'joint="b_')
    (tmp_path / "second.xml").write_text(second)
    cfg = tmp_path / "two.yaml"
    cfg.write_text(yaml.safe_dump({
        "arms": [{"name": "arm", "joint_names": ["j1", "j2"], "gripper_joints": ["f"]},
                 {"name": "other", "joint_names": ["b_j1", "b_j2"]}],
        "scene": {"models": [{"file": str(path)},
                             {"file": str(tmp_path / "second.xml"), "pos": [0, 2.0, 0]}],
                  "floor": False}}))
    plan = tmp_path / "plan.yaml"
    save_plan(swing_through_the_box(), plan)
    cli = [sys.executable, "-m", "mj_manipulator_ros.cli", "check-plan", str(plan),
           "--config", str(cfg)]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "arm 'other' is not in the plan: it stands still at the reference pose" in done.stderr
    assert "gripper joints held at: f 0.0000" in done.stdout, done.stdout
    done = subprocess.run([*cli, "--gripper", "f=0.1"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "obstacle x arm/finger" in done.stdout, done.stdout
