"""System self-check: two real nodes exchange a FollowJointTrajectory goal over DDS.

``mj-manipulator-ros selfcheck`` runs it. It proves the installation end to end: rclpy loads,
the RMW talks over loopback, control_msgs' type support is found, and the action's type hash
is the upstream one (wire compatibility with real controllers).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient, ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.spinner import BackgroundSpinner
from mj_manipulator_ros.ros.action_results import RESULT_TIMEOUT_S

#: Upstream type hashes of control_msgs/action/FollowJointTrajectory, per distro layout.
KILTED_TYPE_HASHES = {
    "control_msgs/action/FollowJointTrajectory":
        "RIHS01_ff29901b2693f5deb847e96084a1c2cdb26e70b7c847be21859b70a55fb29cf0",
    "control_msgs/action/FollowJointTrajectory_Goal":
        "RIHS01_8a9060704b269608f5a340934cc26e66869dd14bdac29e2e7fd9ec8b9882d205",
    "control_msgs/action/FollowJointTrajectory_Result":
        "RIHS01_8002e99ed2c14c6faa522f2a93c26d744c5982f254f9e98ff9c6f19789bdb220",
}
JAZZY_TYPE_HASHES = {
    **KILTED_TYPE_HASHES,  # Goal and Result are the same; the Feedback lacks the index fields
    "control_msgs/action/FollowJointTrajectory":
        "RIHS01_738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6",
}
EXPECTED_TYPE_HASHES = {"kilted": KILTED_TYPE_HASHES, "jazzy": JAZZY_TYPE_HASHES}


def installed_distro() -> str:
    """The ROS 2 distro this environment was set up for (make setup writes .venv/.mjmr-ros),
    else $ROS_DISTRO, else "kilted"."""
    marker = Path(sys.prefix) / ".mjmr-ros"
    if marker.is_file():
        return marker.read_text().strip()
    return os.environ.get("ROS_DISTRO", "kilted")


def interface_description_path(package: str = "control_msgs",
                               relative: str = "action/FollowJointTrajectory.json") -> Path:
    """Locate a generated type description (share/<package>/<relative>) in the ament prefixes.

    Searches ``AMENT_PREFIX_PATH`` and then this interpreter's prefix (the venv).

    Raises:
        FileNotFoundError: naming every prefix searched.
    """
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes.append(sys.prefix)
    for prefix in prefixes:
        candidate = Path(prefix) / "share" / package / relative
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"share/{package}/{relative} not found; searched prefixes: {', '.join(prefixes)}")


def type_hashes(path: Path | None = None) -> dict[str, str]:
    """Type name -> RIHS01 hash string, read from a rosidl type description JSON file."""
    data = json.loads((path or interface_description_path()).read_text())
    return {entry["type_name"]: entry["hash_string"] for entry in data["type_hashes"]}


@dataclass(frozen=True)
class SelfCheckReport:
    """What the self-check saw. Times in seconds (wall clock)."""

    goal_accepted: bool
    feedback_received: int
    result_error_code: int
    result_error_string: str
    cancel_accepted: bool
    canceled_status: int
    round_trip_s: float
    type_hash_matches: bool

    @property
    def ok(self) -> bool:
        return (self.goal_accepted and self.feedback_received > 0 and self.result_error_code == 0
                and self.cancel_accepted and self.type_hash_matches)


def run_selfcheck(timeout: float = 10.0) -> SelfCheckReport:
    """Start a server node and a client node, send one goal to completion and one to cancel."""
    from action_msgs.msg import GoalStatus

    action = f"/mjmr_selfcheck_{uuid.uuid4().hex[:8]}/follow_joint_trajectory"
    with RosContext() as ros:
        server_node = ros_node(ros, "selfcheck_server")
        client_node = ros_node(ros, "selfcheck_client")
        group = ReentrantCallbackGroup()

        def execute(goal_handle):
            result = FollowJointTrajectory.Result()
            feedback = FollowJointTrajectory.Feedback()
            feedback.joint_names = list(goal_handle.request.trajectory.joint_names)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                goal_handle.publish_feedback(feedback)
                if goal_handle.is_cancel_requested:
                    goal_handle.canceled()
                    return result
                if goal_handle.request.trajectory.joint_names == ["finish"]:
                    goal_handle.succeed()
                    result.error_string = "done"
                    return result
                time.sleep(0.01)
            goal_handle.abort()
            result.error_code = FollowJointTrajectory.Result.INVALID_GOAL
            return result

        ActionServer(server_node, FollowJointTrajectory, action, execute,
                     cancel_callback=lambda _req: CancelResponse.ACCEPT, callback_group=group,
                     result_timeout=RESULT_TIMEOUT_S)
        client = ActionClient(client_node, FollowJointTrajectory, action)
        server_exec = MultiThreadedExecutor(num_threads=2, context=ros.context)
        server_exec.add_node(server_node)
        client_exec = SingleThreadedExecutor(context=ros.context)
        client_exec.add_node(client_node)
        with BackgroundSpinner(server_exec, "selfcheck-server"):
            if not client.wait_for_server(timeout_sec=timeout):
                raise TimeoutError(f"action server {action} not discovered within {timeout} s")
            feedback_count = [0]

            def send(names: list[str]):
                goal = FollowJointTrajectory.Goal()
                goal.trajectory.joint_names = names
                future = client.send_goal_async(
                    goal, feedback_callback=lambda _m: feedback_count.__setitem__(0, feedback_count[0] + 1))
                client_exec.spin_until_future_complete(future, timeout_sec=timeout)
                return future.result()

            t0 = time.monotonic()
            handle = send(["finish"])
            result_future = handle.get_result_async()
            client_exec.spin_until_future_complete(result_future, timeout_sec=timeout)
            round_trip = time.monotonic() - t0
            result = result_future.result().result

            handle2 = send(["cancel_me"])
            cancel_future = handle2.cancel_goal_async()
            client_exec.spin_until_future_complete(cancel_future, timeout_sec=timeout)
            result2 = handle2.get_result_async()
            client_exec.spin_until_future_complete(result2, timeout_sec=timeout)
            client.destroy()
        client_exec.shutdown()
        hashes = type_hashes()
        return SelfCheckReport(
            goal_accepted=bool(handle.accepted),
            feedback_received=feedback_count[0],
            result_error_code=int(result.error_code),
            result_error_string=result.error_string,
            cancel_accepted=len(cancel_future.result().goals_canceling) == 1,
            canceled_status=int(result2.result().status),
            round_trip_s=round_trip,
            type_hash_matches=all(hashes.get(k) == v for k, v in
                                  EXPECTED_TYPE_HASHES.get(installed_distro(), KILTED_TYPE_HASHES).items())
            and result2.result().status == GoalStatus.STATUS_CANCELED,
        )


def ros_node(ros: RosContext, name: str):
    """A node in the given context with a unique name suffix."""
    import rclpy

    return rclpy.create_node(f"{name}_{uuid.uuid4().hex[:6]}", context=ros.context)


def main() -> int:
    report = run_selfcheck()
    print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    return 0 if report.ok else 1
