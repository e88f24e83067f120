"""The names a robot's drivers publish: per arm, its controller's and joint states' names
(``driver_joint_names``) mapped to the model's, identical names on per-arm topics allowed.
Every ROS message uses the driver's names, every check the model's."""

from __future__ import annotations

import threading

import pytest
import rclpy
from sensor_msgs.msg import JointState

from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.sim.sim_config import sim_config
from mj_manipulator_ros.sim.sim_node import SimNode
from test_start_state import plan_from
from tiny_arm import tiny_mapping


def driver_named(tmp_path, **execution) -> dict:
    """The tiny pair as an ALOHA-like robot: each arm's driver publishes ``waist`` and
    ``elbow`` on its own topic; the model's names stay ``<arm>_j1``, ``<arm>_j2``."""
    m = tiny_mapping(tmp_path, sim={"real_time_factor": 1.0},
                     execution={"use_sim_time": True, **execution})
    for arm in m["arms"]:
        arm["driver_joint_names"] = ["waist", "elbow"]
        arm["joint_states_topic"] = f"/{arm['name']}/joint_states"
        arm["action"] = f"/{arm['name']}/arm_controller/follow_joint_trajectory"
    return m


def test_a_plan_in_the_models_names_runs_on_controllers_using_their_own(tmp_path, ros) -> None:
    """The simulator speaks the drivers' names only (its goal check rejects any other, as
    joint_trajectory_controller does); the executor's start check, watch and stop figures read
    the arms' joint states under the model's names. A listener of our own sees the drivers'
    names on each arm's topic."""
    config = sim_config(config_from_mapping(driver_named(tmp_path)))
    seen: dict[str, list] = {}
    lock = threading.Lock()
    node = rclpy.create_node("driver_names_listener", context=ros.context)

    def keep(topic):
        def on(msg: JointState) -> None:
            with lock:
                seen.setdefault(topic, []).append(list(msg.name))
        return on
    subs = [node.create_subscription(JointState, t, keep(t), 10)
            for t in ("/left/joint_states", "/right/joint_states", "/joint_states")]
    spin = rclpy.executors.SingleThreadedExecutor(context=ros.context)
    spin.add_node(node)
    sim = SimNode(config, context=ros.context).start()
    try:
        with MultiArmExecutor(config.executor, context=ros.context) as executor:
            report = executor.execute(plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]}, 1.0))
            sent = {a: list(run.sent[0][1].trajectory.joint_names)
                    for a, run in executor.last_run.arms.items()}
        for _ in range(20):
            spin.spin_once(timeout_sec=0.05)
    finally:
        sim.close()
        for s in subs:
            node.destroy_subscription(s)
        spin.shutdown()
        node.destroy_node()
    assert report.succeeded, report.summary()
    assert sent == {"left": ["waist", "elbow"], "right": ["waist", "elbow"]}
    for arm in ("left", "right"):
        r = report.arms[arm]
        # watched on its joint states (None: never read), within the watch's path tolerance
        assert r.max_tracking_error is not None and r.max_velocity > 0.1, (arm, r)
        assert seen.get(f"/{arm}/joint_states"), seen.keys()
        assert all(names == ["waist", "elbow"] for names in seen[f"/{arm}/joint_states"])
    assert "/joint_states" not in seen          # nothing under the default topic
    assert [t.outcome for t in sim.arms["left"].tickets] == ["succeeded"]


def test_the_models_names_are_refused_by_such_a_controller(tmp_path, ros) -> None:
    """The same robot configured without the mapping: the controllers reject the goal by name
    (or, first, the start check finds no joint state for the model's names); nothing moves."""
    m = driver_named(tmp_path, server_wait_s=3.0)
    sim = SimNode(sim_config(config_from_mapping(m)), context=ros.context).start()
    try:
        for arm in m["arms"]:
            del arm["driver_joint_names"]
        with MultiArmExecutor(config_from_mapping(m), context=ros.context) as executor:
            with pytest.raises(Exception) as info:
                executor.execute(plan_from({"left": [0.0, 0.0], "right": [0.0, 0.0]}, 1.0))
        assert "left_j1" in str(info.value), info.value
        assert sim.arms["left"].tickets == [] and sim.arms["right"].tickets == []
    finally:
        sim.close()


@pytest.mark.parametrize("change, message", [
    (lambda m: m["arms"][0].update(driver_joint_names=["waist"]),
     r"arms\[0\].driver_joint_names: expected one name per joint of joint_names \(2: "
     r"\['left_j1', 'left_j2'\]\), got 1: \['waist'\]"),
    (lambda m: m["arms"][0].update(driver_joint_names=["waist", "waist"]),
     r"arms\[0\].driver_joint_names: duplicate name\(s\) \['waist'\]"),
    (lambda m: m["arms"][0].update(driver_joint_names=["waist", ""]), r"an empty name"),
    (lambda m: [a.update(joint_states_topic="/joint_states") for a in m["arms"]],
     r"arms: 'left' and 'right' both publish a joint called 'waist' on /joint_states: .* own "
     r"joint_states_topic"),
    (lambda m: m["arms"][0].update(driver_joint_names="waist"),
     r"arms\[0\].driver_joint_names"),
])
def test_a_mapping_that_cannot_work_is_refused_by_name(tmp_path, change, message) -> None:
    m = driver_named(tmp_path)
    change(m)
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(m)


def test_the_model_names_name_each_joint_once_across_arms_still(tmp_path) -> None:
    m = driver_named(tmp_path)
    m["arms"][1]["joint_names"] = ["left_j1", "right_j2"]
    m["arms"][1].pop("joint_limits")
    with pytest.raises(ConfigError, match="joint 'left_j1' belongs to both 'left' and 'right'"):
        config_from_mapping(m)
