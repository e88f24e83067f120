"""A FollowJointTrajectory action server with one small, explicit behaviour.

For tests, benchmarks and rehearsing failures: it records every goal it receives (stamp,
joints, arrival time) and then does exactly one thing:

=================  ======================================================================
``succeed``        accept; succeed at stamp + the trajectory's duration (ROS time)
``reject``         reject every goal (``after`` s after it came)
``abort_after``    accept; abort ``after`` s past the start with PATH_TOLERANCE_VIOLATED (-4)
``never_finish``   accept; run until canceled
``slow_accept``    wait ``after`` s before accepting, then behave as ``succeed``
``ignore_cancel``  accept; refuse every cancel and run to stamp + duration
``exit_mid_goal``  accept; the *process* exits (os._exit) ``after`` s past the start
``silent``         accept; send no feedback and never finish (a hung controller)
``no_feedback``    accept; send no feedback, succeed at stamp + duration (the action does
                   not require feedback; some vendor drivers send none)
``pause_feedback`` as ``succeed``, but no feedback from ``after`` s past the start for
                   :data:`PAUSE_S` s (a healthy controller on a loaded machine)
=================  ======================================================================

With ``from_goal`` K (default 1), the goals before the K-th (in order of arrival) behave as
``succeed`` and the behaviour applies from the K-th on: for example ``reject`` from goal 2
accepts the plan's goal and rejects every replacement of it (a pause, a stop, a speed change).

A new goal preempts the running one, as joint_trajectory_controller does: the running goal
ends ABORTED ("Current goal preempted by new incoming action.") at once.

While a goal runs, feedback (joint names, header stamp) is published at 20 Hz, like
joint_trajectory_controller's action monitor (``ignore_cancel`` and ``never_finish`` included). It does not move anything; the MuJoCo simulated controller (``mj_manipulator_ros.sim``) is the
one that behaves like joint_trajectory_controller. Run standalone with
``python -m mj_manipulator_ros.ros.scripted_controller --action NAME --behavior B [--after S]
[--from-goal K]``.
"""

from __future__ import annotations

import argparse
import enum
import os
import threading
from dataclasses import dataclass

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.signals import SignalHandlerOptions
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from mj_manipulator_ros.ros.conversion import duration_s, time_ns
from mj_manipulator_ros.ros.action_results import RESULT_TIMEOUT_S

Result = FollowJointTrajectory.Result
FEEDBACK_PERIOD_S = 0.05
#: how long ``pause_feedback`` stays silent, s
PAUSE_S = 1.5
#: how often (s) the main loop looks whether SIGTERM or SIGINT shut the context down
SHUTDOWN_POLL_S = 0.1


class Behavior(str, enum.Enum):
    SUCCEED = "succeed"
    REJECT = "reject"
    ABORT_AFTER = "abort_after"
    NEVER_FINISH = "never_finish"
    SLOW_ACCEPT = "slow_accept"
    IGNORE_CANCEL = "ignore_cancel"
    EXIT_MID_GOAL = "exit_mid_goal"
    SILENT = "silent"
    NO_FEEDBACK = "no_feedback"
    PAUSE_FEEDBACK = "pause_feedback"


@dataclass(frozen=True)
class ReceivedGoal:
    """A goal as it arrived. Times in s on the server node's ROS clock."""

    stamp_ns: int
    joint_names: tuple[str, ...]
    duration_s: float
    received_at: float
    path_tolerance: tuple = ()       # (joint, position, velocity) as sent
    goal_tolerance: tuple = ()
    goal_time_tolerance: float = 0.0


class ScriptedController:
    """An action server on ``node`` (spin ``node`` in a MultiThreadedExecutor).
    ``result_timeout``: how long (s) it keeps a finished goal (and lists it in every status it
    publishes); a benchmark of many goals sets it short."""

    def __init__(self, node: Node, action: str, behavior: Behavior = Behavior.SUCCEED,
                 after: float = 0.0, from_goal: int = 1,
                 result_timeout: float = RESULT_TIMEOUT_S) -> None:
        if from_goal < 1:
            raise ValueError(f"from_goal: expected the number of a goal (1 or more), got "
                             f"{from_goal}")
        self.node = node
        self.behavior = Behavior(behavior)
        self.after = after
        self.from_goal = from_goal
        #: id of each goal message taken -> the behaviour it gets (kept with the message, so
        #: an id is not reused while it is here)
        self._behaviors: dict[int, tuple[object, Behavior]] = {}
        self.goals: list[ReceivedGoal] = []
        #: how each executed goal ended, in order: (its stamp in ns, "succeeded" | "canceled" |
        #: "preempted" | "aborted" | "shut down")
        self.outcomes: list[tuple[int, str]] = []
        self.cancel_requests = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._running: threading.Event | None = None   # the running goal's preemption flag
        self._server = ActionServer(
            node, FollowJointTrajectory, action, self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(), result_timeout=result_timeout)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_goal(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        traj = goal.trajectory
        with self._lock:
            behavior = self.behavior if len(self.goals) + 1 >= self.from_goal \
                else Behavior.SUCCEED
            self._behaviors[id(goal)] = (goal, behavior)
            self.goals.append(ReceivedGoal(
                time_ns(traj.header.stamp), tuple(traj.joint_names),
                duration_s(traj.points[-1].time_from_start) if traj.points else 0.0, self._now(),
                tuple((t.name, t.position, t.velocity) for t in goal.path_tolerance),
                tuple((t.name, t.position, t.velocity) for t in goal.goal_tolerance),
                duration_s(goal.goal_time_tolerance)))
        self.node.get_logger().info(
            f"goal received: {len(traj.joint_names)} joints, {len(traj.points)} points, "
            f"stamp {time_ns(traj.header.stamp)} ns ({behavior.value})")
        if behavior is Behavior.REJECT:
            self._stop.wait(self.after)
            with self._lock:
                self._behaviors.pop(id(goal), None)
            return GoalResponse.REJECT
        if behavior is Behavior.SLOW_ACCEPT:
            self._stop.wait(self.after)
        return GoalResponse.ACCEPT

    def _behavior_of(self, goal: FollowJointTrajectory.Goal) -> Behavior:
        with self._lock:
            return self._behaviors.get(id(goal), (None, self.behavior))[1]

    def _on_cancel(self, goal_handle) -> CancelResponse:
        with self._lock:
            self.cancel_requests += 1
        if self._behavior_of(goal_handle.request) is Behavior.IGNORE_CANCEL:
            return CancelResponse.REJECT
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle) -> Result:
        behavior = self._behavior_of(goal_handle.request)
        traj = goal_handle.request.trajectory
        start = time_ns(traj.header.stamp) * 1e-9 or self._now()
        duration = duration_s(traj.points[-1].time_from_start) if traj.points else 0.0
        end = start + duration
        feedback = FollowJointTrajectory.Feedback()
        feedback.joint_names = list(traj.joint_names)
        next_feedback = 0.0
        preempted = threading.Event()
        with self._lock:
            if self._running is not None:
                self._running.set()
            self._running = preempted
        if behavior is Behavior.ABORT_AFTER:
            end = start + self.after
        elif behavior in (Behavior.NEVER_FINISH, Behavior.SILENT):
            end = float("inf")
        elif behavior is Behavior.EXIT_MID_GOAL:
            end = start + self.after
        stamp_ns = time_ns(traj.header.stamp)

        def ended(outcome: str) -> None:
            with self._lock:
                self.outcomes.append((stamp_ns, outcome))
                self._behaviors.pop(id(goal_handle.request), None)
        while True:
            if goal_handle.is_cancel_requested and behavior is not Behavior.IGNORE_CANCEL:
                goal_handle.canceled()
                ended("canceled")
                return Result(error_code=Result.SUCCESSFUL, error_string="canceled")
            if preempted.is_set():
                goal_handle.abort()
                ended("preempted")
                return Result(error_code=Result.INVALID_GOAL,
                              error_string="Current goal preempted by new incoming action.")
            now = self._now()
            paused = behavior is Behavior.PAUSE_FEEDBACK and \
                start + self.after <= now < start + self.after + PAUSE_S
            if now >= next_feedback and not paused and \
                    behavior not in (Behavior.SILENT, Behavior.NO_FEEDBACK):  # JTC: 20 Hz
                feedback.header.stamp = self.node.get_clock().now().to_msg()
                goal_handle.publish_feedback(feedback)
                next_feedback = now + FEEDBACK_PERIOD_S
            remaining = end - now
            if remaining <= 0 or self._stop.is_set():
                break
            # Cancel requests arrive on another executor thread; re-check every 5 ms.
            self._stop.wait(min(remaining, 0.005))
        if self._stop.is_set():
            goal_handle.abort()
            ended("shut down")
            return Result(error_code=Result.INVALID_GOAL, error_string="controller shut down")
        if behavior is Behavior.EXIT_MID_GOAL:
            os._exit(3)
        if behavior is Behavior.ABORT_AFTER:
            goal_handle.abort()
            ended("aborted")
            return Result(error_code=Result.PATH_TOLERANCE_VIOLATED,
                          error_string=f"scripted abort {self.after} s after the start")
        goal_handle.succeed()
        ended("succeeded")
        return Result(error_code=Result.SUCCESSFUL)

    def shutdown(self) -> None:
        """End every running goal (aborted) and destroy the action server."""
        self._stop.set()
        self._server.destroy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--action", required=True)
    parser.add_argument("--behavior", default="succeed", choices=[b.value for b in Behavior])
    parser.add_argument("--after", type=float, default=0.0)
    parser.add_argument("--from-goal", type=int, default=1,
                        help="the behaviour applies from this goal on; earlier ones succeed")
    args = parser.parse_args(argv)
    # SIGTERM ends it like Ctrl-C: rclpy shuts the context down and the node leaves the graph
    # (killed outright, its servers would linger in the peers' discovery until their lease ran
    # out)
    rclpy.init(signal_handler_options=SignalHandlerOptions.ALL)
    node = rclpy.create_node(f"scripted_controller_{os.getpid()}")
    ScriptedController(node, args.action, Behavior(args.behavior), args.after, args.from_goal)
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    try:
        # not executor.spin(): its wait can miss the shutdown rclpy's SIGTERM handler makes (1
        # of 8 SIGTERMs after a goal left the process waiting until killed, 2026-12-05); the
        # context is looked at again every SHUTDOWN_POLL_S
        while rclpy.ok():
            executor.spin_once(timeout_sec=SHUTDOWN_POLL_S)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown(timeout_sec=2.0)
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
