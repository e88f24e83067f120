"""The combined action: one 14-joint goal -> two synchronized 7-joint goals; cancel stops all."""

from __future__ import annotations

import time

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

from action_helpers import result, send
from factories import make_config, make_plan
from mj_manipulator_ros.core.report import ArmStatus
from mj_manipulator_ros.ros.conversion import trajectory_msg
from mj_manipulator_ros.ros.execution_node import CombinedTrajectoryServer
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.ros.spinner import BackgroundSpinner

ACTION = "/mjmr_test_execution/follow_joint_trajectory"


@pytest.fixture
def combined(ros, scripted):
    """combined(behaviors) -> (send, controllers, server); send(goal) -> (accepted, handle)."""
    parts = []

    def make(behaviors):
        controllers = scripted(behaviors)
        config = make_config(tuple(behaviors), joints=7)
        executor = MultiArmExecutor(config, context=ros.context)
        node = rclpy.create_node("mjmr_test_execution", context=ros.context)
        server = CombinedTrajectoryServer(node, config, executor, ACTION)
        spin = MultiThreadedExecutor(num_threads=4, context=ros.context)
        spin.add_node(node)
        spinner = BackgroundSpinner(spin, "combined-server").start()
        client_node = rclpy.create_node("mjmr_test_client", context=ros.context)
        client = ActionClient(client_node, FollowJointTrajectory, ACTION)
        client_exec = SingleThreadedExecutor(context=ros.context)
        client_exec.add_node(client_node)
        parts.append((server, executor, spinner, node, client, client_exec, client_node))
        assert client.wait_for_server(timeout_sec=10.0)
        return client, client_exec, controllers, server
    yield make
    for server, executor, spinner, node, client, client_exec, client_node in parts:
        client.destroy()
        client_exec.shutdown()
        client_node.destroy_node()
        spinner.stop()
        server.destroy()
        executor.close()
        node.destroy_node()


def combined_goal(arms=("left", "right"), duration=0.6, extra_joint=None):
    plan = make_plan(arms, joints=7, duration=duration)
    msgs = [trajectory_msg(plan[a]) for a in arms]
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = [j for m in msgs for j in m.joint_names]
    for i, p in enumerate(msgs[0].points):
        for m in msgs[1:]:
            p.positions = list(p.positions) + list(m.points[i].positions)
            p.velocities = list(p.velocities) + list(m.points[i].velocities)
        goal.trajectory.points.append(p)
    if extra_joint:
        goal.trajectory.joint_names.append(extra_joint)
        for p in goal.trajectory.points:
            p.positions = list(p.positions) + [0.0]
            p.velocities = list(p.velocities) + [0.0]
    return goal


def test_splits_14_joints_into_two_synchronized_goals(combined) -> None:
    client, client_exec, ctl, server = combined({"left": "succeed", "right": "succeed"})
    feedback = []
    handle = send(client, client_exec, combined_goal(), feedback.append)
    assert handle.accepted
    outcome = result(client_exec, handle)
    assert outcome.status == GoalStatus.STATUS_SUCCEEDED and outcome.result.error_code == 0
    left, right = ctl["left"].goals[0], ctl["right"].goals[0]
    assert left.joint_names == tuple(f"left_j{k}" for k in range(7))
    assert right.joint_names == tuple(f"right_j{k}" for k in range(7))
    assert left.stamp_ns == right.stamp_ns != 0
    assert feedback and list(feedback[-1].feedback.joint_names) == \
        [f"{a}_j{k}" for a in ("left", "right") for k in range(7)]


def test_cancel_of_combined_goal_cancels_every_arm(combined) -> None:
    client, client_exec, ctl, server = combined({"left": "never_finish", "right": "never_finish"})
    handle = send(client, client_exec, combined_goal(duration=5.0))
    deadline = time.monotonic() + 10.0
    while not all(c.goals for c in ctl.values()) and time.monotonic() < deadline:
        client_exec.spin_once(timeout_sec=0.05)
    cancel = handle.cancel_goal_async()
    client_exec.spin_until_future_complete(cancel, timeout_sec=10.0)
    outcome = result(client_exec, handle)
    assert outcome.status == GoalStatus.STATUS_CANCELED
    report = server.last_report
    for arm in ("left", "right"):
        assert report.arms[arm].status is ArmStatus.CANCELED and report.arms[arm].stop_confirmed
        assert ctl[arm].cancel_requests == 1


def test_failure_names_the_arm(combined) -> None:
    client, client_exec, ctl, server = combined({"left": "succeed", "right": ("abort_after", 0.1)})
    handle = send(client, client_exec, combined_goal(duration=2.0))
    outcome = result(client_exec, handle)
    assert outcome.status == GoalStatus.STATUS_ABORTED
    assert outcome.result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
    assert outcome.result.error_string.startswith("arm 'right': aborted")
    assert server.last_report.arms["left"].status is ArmStatus.CANCELED


def test_goal_with_joint_of_no_arm_is_rejected(combined) -> None:
    client, client_exec, ctl, _ = combined({"left": "succeed", "right": "succeed"})
    handle = send(client, client_exec, combined_goal(extra_joint="head_pan"))
    assert not handle.accepted
    assert ctl["left"].goals == [] and ctl["right"].goals == []


def test_one_arm_goal_runs_only_that_arm(combined) -> None:
    client, client_exec, ctl, _ = combined({"left": "succeed", "right": "succeed"})
    handle = send(client, client_exec, combined_goal(arms=("right",)))
    assert result(client_exec, handle).status == GoalStatus.STATUS_SUCCEEDED
    assert ctl["left"].goals == [] and len(ctl["right"].goals) == 1
