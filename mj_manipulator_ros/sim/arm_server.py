"""One simulated arm's FollowJointTrajectory action server (joint_trajectory_controller rows:
checks in ``sim/goal.py``, execution by the arm's simulated controller in ``sim/controllers``)."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections import deque
import threading
import time

import rclpy
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import ClockType
from rclpy.node import Node
from rclpy.time import Time
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectoryPoint

from mj_manipulator_ros.core.config import ArmConfig
from mj_manipulator_ros.ros.conversion import (duration_s, goal_tolerances, point_rows,
                                                stamp_msg, time_ns)
from mj_manipulator_ros.sim.goal import (
    PREEMPTED_MESSAGE, ControllerGoal, GoalOutcome, GoalRequest, GoalTicket, check_goal)
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import ArmFaults, SimConfig
from mj_manipulator_ros.ros.action_results import RESULT_TIMEOUT_S, release_request

Result = FollowJointTrajectory.Result

#: how long (s, wall clock) an activate or deactivate request waits for the physics thread
SWITCH_WAIT_S = 1.0


class SimArmServer:
    """One simulated arm's FollowJointTrajectory server."""

    def __init__(self, node: Node, arm: ArmConfig, shared: SharedModel, config: SimConfig) -> None:
        self.node, self.arm, self.shared, self.config = node, arm, shared, config
        self.controller = shared.controllers[arm.name]
        self.tickets: list[GoalTicket] = []  # every accepted goal, in order (tests, demo)
        #: every goal's arrival and answer on this arm's controller clock, s (the last 100)
        self.answers: deque = deque(maxlen=100)
        self._by_goal: dict[bytes, GoalTicket] = {}
        self._early_cancels: set[bytes] = set()
        self._lock = threading.Lock()
        # goals are handed to the controller in the order they were accepted (as JTC): the
        # execute callbacks of a multi-threaded executor may run in another order
        self._accepted = 0                       # goals accepted so far
        #: id(goal request) -> its acceptance number and the goal as checked on arrival (a
        #: 1,401-point goal costs ~16 ms to convert and check on a 2-core machine, idle: taken
        #: over by its execution, not done twice)
        self._order: dict[int, tuple[int, ControllerGoal]] = {}
        self._submitted = 0                      # the newest acceptance number handed over
        self._handled = 0                        # accepted goals handed over or ended unrun
        self._reject_armed = self.controller.faults.reject_next_goal
        self.closing = threading.Event()  # set by SimNode.close: every goal ends, none starts
        #: the controller's own node, as ros2_control gives each controller one: its clock is
        #: this arm's controller clock, so the action server stamps a goal's acceptance on the
        #: clock its start stamp is on (rclpy stamps it with the server node's clock: the
        #: simulator's node, on the system clock, gave stamps the executor could not use on sim
        #: time, and a goal taken 24 ms after its stamp passed as taken in time, judged by when
        #: the answer was read on the executor's /clock, which lagged physics under load)
        self.controller_node = rclpy.create_node(
            controller_node_name(node.get_name(), arm.name), context=node.context,
            start_parameter_services=False)
        self.controller_node.get_clock()._set_ros_time_is_active(True)
        self._clock_lock = threading.Lock()   # physics' observer and the goals' threads
        self._destroyed = False
        self.set_clock(self.shared.controller_time(arm.name))
        self._server = ActionServer(
            self.controller_node, FollowJointTrajectory, arm.action_name, self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(), result_timeout=RESULT_TIMEOUT_S)
        #: the controller's lifecycle, as ros2_control's switch_controller moves it:
        #: ``<controller node>/activate`` and ``/deactivate`` (sim.arms.<arm>.start_active)
        self._switches = [self.controller_node.create_service(
            Trigger, f"~/{verb}", functools.partial(self._on_switch, verb == "activate"),
            callback_group=ReentrantCallbackGroup()) for verb in ("activate", "deactivate")]

    @property
    def faults(self) -> ArmFaults:
        return self.controller.faults

    @property
    def goals_not_taken(self) -> int:
        """Goals accepted and not yet handed to the controller (nor ended unrun): a driver
        that steps physics itself waits for 0 before stepping past a goal's stamp."""
        with self._lock:
            return max(0, self._accepted - self._handled)

    def set_faults(self, faults: ArmFaults) -> None:
        self.controller.faults = faults
        with self._lock:
            self._reject_armed = faults.reject_next_goal

    def _request(self, goal: FollowJointTrajectory.Goal) -> GoalRequest:
        t = goal.trajectory
        asked = goal_tolerances(goal)
        points = t.points
        return GoalRequest(
            tuple(t.joint_names), [duration_s(p.time_from_start) for p in points],
            point_rows([p.positions for p in points]), point_rows([p.velocities for p in points]),
            point_rows([p.accelerations for p in points]), time_ns(t.header.stamp) * 1e-9,
            asked.path, asked.goal, asked.goal_time, point_rows([p.effort for p in points]))

    def set_clock(self, now: float) -> None:
        """The controller node's clock set to ``now`` (this arm's controller clock, s): at each
        goal's answer (rclpy stamps the acceptance just after) and periodically (the kept
        results expire on it)."""
        with self._clock_lock:
            if not self._destroyed:   # (a test's controller gone: physics goes on)
                # a ROS time is never negative: a clock fault stepping a clock back from near
                # its start reads 0 here (its joint-state stamps carry the fault)
                self.controller_node.get_clock().set_ros_time_override(
                    Time(nanoseconds=max(0, int(round(now * 1e9))), clock_type=ClockType.ROS_TIME))

    def _on_goal(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        arrived = self.shared.controller_time(self.arm.name)
        try:
            return self._answer(goal)
        finally:
            answered = self.shared.controller_time(self.arm.name)
            self.set_clock(answered)   # the acceptance stamp: the time of the answer
            self.answers.append((arrived, answered))

    def _answer(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        with self._lock:
            if self._reject_armed:
                self._reject_armed = False  # once: the stored faults forget it too
                self.controller.faults = dataclasses.replace(self.controller.faults,
                                                           reject_next_goal=False)
                self.node.get_logger().warning(f"{self.arm.name}: rejecting goal (injected fault)")
                return GoalResponse.REJECT
        if not self.controller.follower.activated:   # as JTC while inactive
            self.node.get_logger().error(f"{self.arm.name}: rejecting goal: the controller is "
                                         "not active (call its activate service)")
            return GoalResponse.REJECT
        if self.faults.accept_delay_s > 0:  # the injected fault *is* a blocking delay, on the
            self._wait_controller_time(self.faults.accept_delay_s)   # controller's clock
        reason, checked = self._check(goal)
        if reason:
            self.node.get_logger().error(f"{self.arm.name}: rejecting goal: {reason}")
            return GoalResponse.REJECT
        with self._lock:
            self._accepted += 1
            self._order[id(goal)] = (self._accepted, checked)
        return GoalResponse.ACCEPT

    def _on_switch(self, active: bool, request, response):
        """Activate or deactivate the arm's controller at the next control cycle; answers once
        the physics thread has done it (at most SWITCH_WAIT_S of wall time)."""
        verb = "activated" if active else "deactivated"
        was = self.controller.follower.activated
        done = self.controller.follower.request_activation(active)
        response.success = done.wait(SWITCH_WAIT_S)
        response.message = (f"{self.arm.name}: controller {verb}" + (" (it was already)"
                                                                     if was == active else "")
                            if response.success else
                            f"{self.arm.name}: not {verb} within {SWITCH_WAIT_S} s (is the "
                            "physics stepping?); it will be at its next control cycle")
        # not logged here: rclpy's logger took 83-400 ms per call in the bring-up's process,
        # and the reply would wait for it (the message says it to the caller)
        return response

    def _wait_controller_time(self, seconds: float) -> None:
        """Block until ``seconds`` have passed on this arm's controller clock (sim time on
        sim time: a slow simulator makes the delay longer in wall time, never shorter in the
        clock the stamps are on); bounded by 20x in wall time, and by the node closing."""
        until = self.shared.controller_time(self.arm.name) + seconds
        deadline = time.monotonic() + 20 * seconds + 1.0
        while self.shared.controller_time(self.arm.name) < until and \
                time.monotonic() < deadline and not self.closing.is_set():
            time.sleep(0.001)

    def _check(self, goal, at_execute: bool = False):
        """The goal checked as JTC does on arrival; ``at_execute`` converts an accepted goal
        without the time check (JTC never aborts an accepted goal for its stamp)."""
        s = self.config.sim
        hold = self.shared.snapshot().arms[self.arm.name].positions
        now = None if at_execute else self.shared.controller_time(self.arm.name)
        return check_goal(self._request(goal), self.arm.wire_names, now,   # the driver's names
                          s.tolerances, s.allow_partial_joints_goal,
                          s.allow_nonzero_velocity_at_trajectory_end, hold)

    def _on_cancel(self, goal_handle) -> CancelResponse:
        if self.faults.ignore_cancel:
            self.node.get_logger().warning(f"{self.arm.name}: refusing cancel (injected fault)")
            return CancelResponse.REJECT
        key = bytes(goal_handle.goal_id.uuid)
        with self._lock:
            ticket = self._by_goal.get(key)
            if ticket is None:  # accepted, not yet executing: keep the cancel for _execute
                self._early_cancels.add(key)
        if ticket is not None:
            self.controller.cancel(ticket)
        if self.faults.cancel_delay_s > 0:
            time.sleep(self.faults.cancel_delay_s)  # the injected fault *is* a blocking delay
        return CancelResponse.ACCEPT  # always (unless faulted), as joint_trajectory_controller

    def _execute(self, goal_handle) -> Result:
        try:
            return self._run(goal_handle)
        finally:  # the handle is kept 15 min for its result: no message object with it
            with self._lock:   # (its id may be reused once freed)
                self._order.pop(id(goal_handle.request), None)
            release_request(goal_handle)

    def _run(self, goal_handle) -> Result:
        if self.faults.pickup_delay_s > 0:
            time.sleep(self.faults.pickup_delay_s)  # the injected fault *is* a blocking delay
        closing = self.closing.is_set()
        with self._lock:
            number, goal = self._order.pop(id(goal_handle.request), (self._accepted, None))
            self._handled += closing
        if closing:
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string="simulator shutting down")
        reason = None
        if goal is None:   # (accepted elsewhere than _on_goal: checked here, as JTC would)
            reason, goal = self._check(goal_handle.request, at_execute=True)
        if reason:  # cannot happen: the same checks passed at acceptance
            with self._lock:
                self._handled += 1
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string=reason)
        if goal.tolerance_warning:
            self.node.get_logger().warning(f"{self.arm.name}: {goal.tolerance_warning}")
        with self._lock:
            stale = number < self._submitted
            if not stale:
                self._submitted = number
                ticket = self.controller.submit(goal)
            self._handled += 1
        if stale:   # a goal accepted after this one already runs: this one was preempted
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string=PREEMPTED_MESSAGE)
        key = bytes(goal_handle.goal_id.uuid)
        with self._lock:  # a cancel that came before this point was kept: apply it now
            self._by_goal[key] = ticket
            self.tickets.append(ticket)
            early = key in self._early_cancels
            self._early_cancels.discard(key)
        if early or goal_handle.is_cancel_requested:
            self.controller.cancel(ticket)
        period = 1.0 / self.config.sim.feedback_rate_hz
        try:
            while not ticket.done.wait(period):
                self._publish_feedback(goal_handle, ticket)
                exit_after = self.faults.exit_after_s
                if exit_after is not None and ticket.started_at is not None and \
                        self.shared.controller_time(self.arm.name) >= ticket.started_at + exit_after:
                    self.node.get_logger().error(f"{self.arm.name}: exiting (injected fault)")
                    os._exit(5)
                if self.closing.is_set() or not self.node.context.ok():
                    break
            self._publish_feedback(goal_handle, ticket)
        finally:
            with self._lock:
                self._by_goal.pop(key, None)
        try:
            return self._end(goal_handle, ticket)
        finally:
            ticket.result_sent.set()

    def _end(self, goal_handle, ticket: GoalTicket) -> Result:
        """The goal's final state and result, from its ticket."""
        result = Result(error_code=ticket.error_code, error_string=ticket.error_string)
        if ticket.outcome is GoalOutcome.SUCCEEDED:
            goal_handle.succeed()
        elif ticket.outcome is GoalOutcome.CANCELED:
            _wait_until(lambda: goal_handle.is_cancel_requested, 1.0)
            goal_handle.canceled()
        else:
            if ticket.outcome is None:  # shutting down
                result = Result(error_code=Result.INVALID_GOAL, error_string="simulator shutting down")
            goal_handle.abort()
        return result

    def _publish_feedback(self, goal_handle, ticket: GoalTicket) -> None:
        latest = ticket.latest()   # one cycle's values
        if latest is None:
            return
        fb = FollowJointTrajectory.Feedback()
        fb.header.stamp = stamp_msg(latest.time)
        fb.joint_names = list(self.arm.wire_names)
        fb.desired = JointTrajectoryPoint(positions=latest.desired.tolist(),
                                          velocities=latest.desired_velocity.tolist(),
                                          accelerations=latest.desired_acceleration.tolist())
        fb.actual = JointTrajectoryPoint(positions=latest.actual.tolist(),
                                         velocities=latest.actual_velocity.tolist())
        fb.error = JointTrajectoryPoint(
            positions=(latest.desired - latest.actual).tolist(),
            velocities=(latest.desired_velocity - latest.actual_velocity).tolist())
        if hasattr(fb, "index"):  # control_msgs >= 6.3 (Kilted); not in Jazzy's layout
            fb.index = latest.index
        goal_handle.publish_feedback(fb)

    def destroy(self) -> None:
        """Destroy the action server (the arm is served no more: a controller gone). Once: the
        simulator's close after a bench or test destroyed it already does nothing more."""
        with self._clock_lock:
            if self._destroyed:
                return
            self._destroyed = True
        self._server.destroy()
        spinning = self.controller_node.executor
        if spinning is not None:   # out of the simulator's executor first (its wait set)
            spinning.remove_node(self.controller_node)
        self.controller_node.destroy_node()


def controller_node_name(sim_node: str, arm: str) -> str:
    """The node of ``arm``'s simulated controller: ``<sim node>_<arm>_controller``, the arm's
    name made a valid node name (any character but a letter, digit or _ becomes _)."""
    return re.sub(r"\W", "_", f"{sim_node}_{arm}_controller", flags=re.ASCII)


def _wait_until(predicate, timeout: float) -> bool:
    """rclpy moves a goal to CANCELING just after the cancel callback returns; the follower may
    finish first. Wait (bounded) for the transition before calling canceled()."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True
