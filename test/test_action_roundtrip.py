"""A real FollowJointTrajectory round trip (goal, feedback, result, cancel) between a real rclpy
ActionServer and ActionClient over DDS on loopback."""

from __future__ import annotations

import threading

import rclpy
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient, ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from trajectory_msgs.msg import JointTrajectoryPoint

from mj_manipulator_ros.ros.spinner import BackgroundSpinner

ACTION = "/test_arm_controller/follow_joint_trajectory"


def _server(ros, release: threading.Event):
    node = rclpy.create_node("fjt_server", context=ros.context)

    def execute(goal_handle):
        fb = FollowJointTrajectory.Feedback()
        fb.joint_names = list(goal_handle.request.trajectory.joint_names)
        if hasattr(fb, "index"):  # Kilted layout
            fb.index = len(goal_handle.request.trajectory.points) - 1
        goal_handle.publish_feedback(fb)
        # Wait (bounded, event-driven) for the test to release the goal or cancel it.
        for _ in range(200):
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                return FollowJointTrajectory.Result(error_string="canceled")
            if release.wait(0.025):
                break
        goal_handle.succeed()
        return FollowJointTrajectory.Result(
            error_code=FollowJointTrajectory.Result.SUCCESSFUL,
            error_string=f"followed {len(goal_handle.request.trajectory.points)} points")

    ActionServer(node, FollowJointTrajectory, ACTION, execute,
                 cancel_callback=lambda _r: CancelResponse.ACCEPT,
                 callback_group=ReentrantCallbackGroup())
    executor = MultiThreadedExecutor(num_threads=2, context=ros.context)
    executor.add_node(node)
    return executor


def _goal(n_points: int) -> FollowJointTrajectory.Goal:
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = ["j1", "j2"]
    for i in range(n_points):
        p = JointTrajectoryPoint(positions=[0.1 * i, -0.1 * i])
        p.time_from_start.sec = i + 1
        goal.trajectory.points.append(p)
    return goal


def test_goal_feedback_result_and_cancel(ros) -> None:
    release = threading.Event()
    client_node = rclpy.create_node("fjt_client", context=ros.context)
    client = ActionClient(client_node, FollowJointTrajectory, ACTION)
    client_exec = SingleThreadedExecutor(context=ros.context)
    client_exec.add_node(client_node)
    feedback = []
    with BackgroundSpinner(_server(ros, release), "test-fjt-server"):
        assert client.wait_for_server(timeout_sec=10.0)

        # goal -> feedback -> result
        send = client.send_goal_async(_goal(3), feedback_callback=feedback.append)
        client_exec.spin_until_future_complete(send, timeout_sec=10.0)
        handle = send.result()
        assert handle.accepted
        result_future = handle.get_result_async()
        client_exec.spin_until_future_complete(result_future, timeout_sec=0.5)
        release.set()
        client_exec.spin_until_future_complete(result_future, timeout_sec=10.0)
        outcome = result_future.result()
        assert outcome.status == GoalStatus.STATUS_SUCCEEDED
        assert outcome.result.error_code == 0
        assert outcome.result.error_string == "followed 3 points"
        assert feedback and feedback[0].feedback.joint_names == ["j1", "j2"]
        if "index" in FollowJointTrajectory.Feedback.get_fields_and_field_types():  # Kilted
            assert feedback[0].feedback.index == 2

        # goal -> cancel -> CANCELED
        release.clear()
        send = client.send_goal_async(_goal(2))
        client_exec.spin_until_future_complete(send, timeout_sec=10.0)
        cancel = send.result().cancel_goal_async()
        client_exec.spin_until_future_complete(cancel, timeout_sec=10.0)
        assert len(cancel.result().goals_canceling) == 1
        result_future = send.result().get_result_async()
        client_exec.spin_until_future_complete(result_future, timeout_sec=10.0)
        assert result_future.result().status == GoalStatus.STATUS_CANCELED
    client.destroy()
    client_exec.shutdown()


def test_selfcheck_reports_ok() -> None:
    from mj_manipulator_ros.ros.selfcheck import run_selfcheck

    report = run_selfcheck()
    assert report.ok, report
