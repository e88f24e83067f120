"""launch_testing: start sim.launch.py, wait for /joint_states and the combined action, execute
the crossing plan, assert success and start skew. Runs under `colcon test` in a ROS 2 distro;
launch_testing is not installable in the wheel environment, so here the module is skipped (the
same node graph runs as separate processes in test_multiprocess.py)."""

import pytest

launch_testing = pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed (no ROS 2 distro): run under colcon test")

import time  # noqa: E402
import unittest  # noqa: E402

import launch  # noqa: E402
import launch.launch_description_sources  # noqa: E402
import rclpy  # noqa: E402
from ament_index_python.packages import get_package_share_directory  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402


@pytest.mark.launch_test
def generate_test_description():
    share = get_package_share_directory("mj_manipulator_ros")
    sim = launch.actions.IncludeLaunchDescription(
        launch.launch_description_sources.PythonLaunchDescriptionSource(f"{share}/launch/sim.launch.py"))
    return launch.LaunchDescription([sim, launch_testing.actions.ReadyToTest()])


class TestCrossingPlan(unittest.TestCase):
    def test_crossing_plan_synchronized(self):
        from mj_manipulator_ros.core.plan_io import load_plan
        from mj_manipulator_ros.apps.demo import COMBINED_ACTION, combined_trajectory
        from mj_manipulator_ros.resources import share_dir

        rclpy.init()
        try:
            node = rclpy.create_node("crossing_plan_test")
            states = []
            node.create_subscription(JointState, "/joint_states", states.append, 10)
            deadline = time.monotonic() + 60
            while not states and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.1)
            self.assertTrue(states, "no /joint_states")
            client = ActionClient(node, FollowJointTrajectory, COMBINED_ACTION)
            self.assertTrue(client.wait_for_server(timeout_sec=60))
            plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
            goal = FollowJointTrajectory.Goal(trajectory=combined_trajectory(plan))
            future = client.send_goal_async(goal)
            rclpy.spin_until_future_complete(node, future, timeout_sec=30)
            handle = future.result()
            self.assertTrue(handle.accepted)
            result = handle.get_result_async()
            rclpy.spin_until_future_complete(node, result, timeout_sec=plan.duration * 3 + 30)
            self.assertEqual(result.result().result.error_code, 0, result.result().result.error_string)
            # start skew from /joint_states: each arm's first message that moved > 2 mrad
            onsets = {}
            first = {n: p for n, p in zip(states[0].name, states[0].position)}
            for msg in states:
                t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                for arm in ("left", "right"):
                    moved = any(abs(p - first[n]) > 0.002 for n, p in zip(msg.name, msg.position)
                                if f"_{arm}_" in n)
                    if moved and arm not in onsets:
                        onsets[arm] = t
            self.assertEqual(set(onsets), {"left", "right"})
            self.assertLessEqual(abs(onsets["left"] - onsets["right"]), 0.02)
        finally:
            rclpy.shutdown()
