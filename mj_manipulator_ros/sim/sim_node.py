"""The simulator node: MuJoCo arms behind FollowJointTrajectory action servers.

Per arm, an action server at the arm's configured action (default
``/<arm>_arm_controller/follow_joint_trajectory``) with joint_trajectory_controller semantics
(checks in ``sim/goal.py``, execution in ``sim/trajectory_follower.py``). Also:

- ``/joint_states`` (sensor_msgs/JointState; every arm's joints; positions, velocities,
  efforts) at ``sim.joint_state_rate_hz`` of simulated time, always, also while moving;
- with ``use_sim_time``: ``/clock`` from the physics time every control cycle, and goal stamps
  are read on that clock; otherwise the controllers use the system clock (ROS time) and physics
  is paced at ``real_time_factor`` (which should then be 1);
- faults per arm (``sim.faults.<arm>`` in the config, or :meth:`SimNode.set_faults`):

  =====================  ==================================================================
  ``reject_next_goal``   the next goal is rejected (once)
  ``abort_after_s``      each goal aborts this long after its start (-4, "injected fault")
  ``stall``              goals are accepted and never finish (the arm holds); cancel works
  ``accept_delay_s``     the goal callback waits this long before accepting
  ``command_latency_s``  position commands reach the servos this late (a delay line)
  ``ignore_cancel``      cancels are refused and the arm keeps moving
  ``exit_after_s``       the simulator process exits (os._exit) this long after a goal starts
  =====================  ==================================================================
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from typing import Optional

import rclpy
from builtin_interfaces.msg import Time
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from mj_manipulator_ros.core.config import ArmConfig
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.conversion import duration_s, time_ns
from mj_manipulator_ros.ros.spinner import BackgroundSpinner
from mj_manipulator_ros.sim.goal import GoalRequest, GoalTicket, ToleranceRequest, check_goal
from mj_manipulator_ros.sim.scene import Scene
from mj_manipulator_ros.sim.shared_model import SharedModel, Snapshot
from mj_manipulator_ros.sim.sim_config import ArmFaults, SimConfig

Result = FollowJointTrajectory.Result


def _stamp(seconds: float) -> Time:
    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


class SimArmServer:
    """One simulated arm's FollowJointTrajectory server."""

    def __init__(self, node: Node, arm: ArmConfig, shared: SharedModel, config: SimConfig) -> None:
        self.node, self.arm, self.shared, self.config = node, arm, shared, config
        self.follower = shared.followers[arm.name]
        self.tickets: list[GoalTicket] = []  # every accepted goal, in order (tests, demo)
        self._by_goal: dict[bytes, GoalTicket] = {}
        self._lock = threading.Lock()
        self._reject_armed = self.follower.faults.reject_next_goal
        self.closing = threading.Event()  # set by SimNode.close: every goal ends, none starts
        self._server = ActionServer(
            node, FollowJointTrajectory, arm.action_name, self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup())

    @property
    def faults(self) -> ArmFaults:
        return self.follower.faults

    def set_faults(self, faults: ArmFaults) -> None:
        self.follower.faults = faults
        with self._lock:
            self._reject_armed = faults.reject_next_goal

    def _request(self, goal: FollowJointTrajectory.Goal) -> GoalRequest:
        t = goal.trajectory
        return GoalRequest(
            tuple(t.joint_names), [duration_s(p.time_from_start) for p in t.points],
            [list(p.positions) for p in t.points], [list(p.velocities) for p in t.points],
            [list(p.accelerations) for p in t.points], time_ns(t.header.stamp) * 1e-9,
            tuple(ToleranceRequest(x.name, x.position, x.velocity) for x in goal.path_tolerance),
            tuple(ToleranceRequest(x.name, x.position, x.velocity) for x in goal.goal_tolerance),
            duration_s(goal.goal_time_tolerance))  # negative = unchecked

    def _on_goal(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        with self._lock:
            if self._reject_armed:
                self._reject_armed = False  # once: the stored faults forget it too
                self.follower.faults = dataclasses.replace(self.follower.faults,
                                                           reject_next_goal=False)
                self.node.get_logger().warning(f"{self.arm.name}: rejecting goal (injected fault)")
                return GoalResponse.REJECT
        if self.faults.accept_delay_s > 0:
            time.sleep(self.faults.accept_delay_s)  # the injected fault *is* a blocking delay
        reason, _ = self._check(goal)
        if reason:
            self.node.get_logger().error(f"{self.arm.name}: rejecting goal: {reason}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _check(self, goal):
        s = self.config.sim
        hold = self.shared.snapshot().arms[self.arm.name].positions
        return check_goal(self._request(goal), self.arm.joint_names, self.shared.controller_time(),
                          s.tolerances, s.allow_partial_joints_goal,
                          s.allow_nonzero_velocity_at_trajectory_end, hold)

    def _on_cancel(self, goal_handle) -> CancelResponse:
        if self.faults.ignore_cancel:
            self.node.get_logger().warning(f"{self.arm.name}: refusing cancel (injected fault)")
            return CancelResponse.REJECT
        with self._lock:
            ticket = self._by_goal.get(bytes(goal_handle.goal_id.uuid))
        if ticket is not None:
            self.follower.cancel(ticket)
        return CancelResponse.ACCEPT  # always (unless faulted), as joint_trajectory_controller

    def _execute(self, goal_handle) -> Result:
        if self.closing.is_set():
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string="simulator shutting down")
        reason, goal = self._check(goal_handle.request)
        if reason:  # became invalid between acceptance and execution (e.g. now in the past)
            goal_handle.abort()
            return Result(error_code=Result.OLD_HEADER_TIMESTAMP, error_string=reason)
        ticket = self.follower.submit(goal)
        key = bytes(goal_handle.goal_id.uuid)
        with self._lock:
            self._by_goal[key] = ticket
            self.tickets.append(ticket)
        if goal_handle.is_cancel_requested:
            self.follower.cancel(ticket)
        period = 1.0 / self.config.sim.feedback_rate_hz
        try:
            while not ticket.done.wait(period):
                self._publish_feedback(goal_handle, ticket)
                exit_after = self.faults.exit_after_s
                if exit_after is not None and ticket.started_at is not None and \
                        self.shared.controller_time() >= ticket.started_at + exit_after:
                    self.node.get_logger().error(f"{self.arm.name}: exiting (injected fault)")
                    os._exit(5)
                if self.closing.is_set() or not self.node.context.ok():
                    break
            self._publish_feedback(goal_handle, ticket)
        finally:
            with self._lock:
                self._by_goal.pop(key, None)
        result = Result(error_code=ticket.error_code, error_string=ticket.error_string)
        if ticket.outcome == "succeeded":
            goal_handle.succeed()
        elif ticket.outcome == "canceled":
            _wait_until(lambda: goal_handle.is_cancel_requested, 1.0)
            goal_handle.canceled()
        else:
            if ticket.outcome is None:  # shutting down
                result = Result(error_code=Result.INVALID_GOAL, error_string="simulator shutting down")
            goal_handle.abort()
        return result

    def _publish_feedback(self, goal_handle, ticket: GoalTicket) -> None:
        with ticket.lock:
            if ticket.desired is None:
                return
            fb = FollowJointTrajectory.Feedback()
            fb.header.stamp = _stamp(ticket.time)
            fb.joint_names = list(self.arm.joint_names)
            fb.desired = JointTrajectoryPoint(positions=ticket.desired.tolist(),
                                              velocities=ticket.desired_velocity.tolist())
            fb.actual = JointTrajectoryPoint(positions=ticket.actual.tolist(),
                                             velocities=ticket.actual_velocity.tolist())
            fb.error = JointTrajectoryPoint(
                positions=(ticket.desired - ticket.actual).tolist(),
                velocities=(ticket.desired_velocity - ticket.actual_velocity).tolist())
            if hasattr(fb, "index"):  # control_msgs >= 6.3 (Kilted); not in Jazzy's layout
                fb.index = ticket.index
        goal_handle.publish_feedback(fb)

    def destroy(self) -> None:
        self._server.destroy()


def _wait_until(predicate, timeout: float) -> bool:
    """rclpy moves a goal to CANCELING just after the cancel callback returns; the follower may
    finish first. Wait (bounded) for the transition before calling canceled()."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


class SimNode:
    """The whole simulator: scene, physics thread, one action server per arm, publishers.

    Args:
        config: the simulator configuration.
        context: an initialised rclpy context, or None to own one.
    """

    def __init__(self, config: SimConfig, context=None, node_name: str = "mj_manipulator_sim",
                 serve: list[str] | None = None, record: str | None = None) -> None:
        """serve: the arms to serve (action servers, joint states); default every arm. The
        others are simulated, holding their pose (one process per arm: serve=[arm])."""
        self.config = config
        unknown = sorted(set(serve or []) - set(config.executor.arm_names))
        if unknown:
            from mj_manipulator_ros.core.errors import ConfigError
            raise ConfigError(f"cannot serve unknown arm(s) {unknown}; arms: "
                              f"{list(config.executor.arm_names)}")
        self._owned = None
        if context is None:
            self._owned = RosContext()
            context = self._owned.context
        self.scene = Scene.from_config(config)
        use_sim = config.sim.use_sim_time
        self.shared = SharedModel(self.scene, clock=None if use_sim else (lambda _t: time.time()))
        self.node = rclpy.create_node(f"{node_name}", context=context)
        self.arms = {a.name: SimArmServer(self.node, a, self.shared, config)
                     for a in config.executor.arms if serve is None or a.name in serve}
        self._joint_pub = self.node.create_publisher(JointState, "/joint_states", 10)
        self._clock_pub = self.node.create_publisher(Clock, "/clock", 10) if use_sim else None
        self._served = [n for n in self.scene.arms if n in self.arms]
        self._joint_names = [j for n in self._served for j in self.scene.arms[n].joint_names]
        self.shared.add_observer(config.sim.joint_state_rate_hz, self._publish_joint_states)
        if self._clock_pub is not None:
            self.shared.add_observer(config.sim.control_rate_hz, self._publish_clock)
        self._executor = MultiThreadedExecutor(num_threads=2 + 2 * len(self.arms), context=context)
        self._executor.add_node(self.node)
        self._spinner: Optional[BackgroundSpinner] = None
        self.recorder = None
        if record:
            from mj_manipulator_ros.ros.joint_state_recorder import JointStateRecorder
            self.recorder = JointStateRecorder(self.node, record)

    def _publish_joint_states(self, snap: Snapshot) -> None:
        msg = JointState()
        msg.header.stamp = _stamp(snap.controller_time)
        msg.name = self._joint_names
        arms = [snap.arms[n] for n in self._served]
        msg.position = [float(x) for a in arms for x in a.positions]
        msg.velocity = [float(x) for a in arms for x in a.velocities]
        msg.effort = [float(x) for a in arms for x in a.efforts]
        self._joint_pub.publish(msg)

    def _publish_clock(self, snap: Snapshot) -> None:
        self._clock_pub.publish(Clock(clock=_stamp(snap.sim_time)))

    def set_faults(self, arm: str, **changes) -> None:
        """Change an arm's injected faults at run time (fields of ArmFaults)."""
        server = self.arms[arm]
        server.set_faults(dataclasses.replace(server.faults, **changes))

    def start(self) -> "SimNode":
        self.shared.start()
        self._spinner = BackgroundSpinner(self._executor, f"mjmr-sim-{uuid.uuid4().hex[:4]}").start()
        return self

    def close(self) -> None:
        """Stop physics, end running goals, destroy the node (and the owned context)."""
        for server in self.arms.values():  # before physics stops: no goal may wait for it
            server.closing.set()
        self.shared.stop()
        for ticket_list in (s.tickets for s in self.arms.values()):
            for t in ticket_list:
                t.done.set()
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None
        for s in self.arms.values():
            s.destroy()
        if self.recorder is not None:
            self.recorder.close()
        self.node.destroy_node()
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> "SimNode":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def run_sim(config_path: str | None, argv: list[str] | None = None,
            serve: list[str] | None = None, record: str | None = None) -> int:
    """Run the simulator until SIGINT/SIGTERM. ROS parameters (``--ros-args -p``) override:
    ``config`` (file), ``use_sim_time``, ``real_time_factor``, ``serve`` (arm names)."""
    import dataclasses as dc
    import signal

    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.ros.params import parameter_overrides
    from mj_manipulator_ros.sim.sim_config import sim_config

    ros = RosContext(args=argv)
    try:
        params = parameter_overrides(ros.context)
        path = config_path or params.get("config")
        if not path:
            print("sim: no configuration: --config FILE or --ros-args -p config:=FILE")
            return 2
        config = sim_config(load_config(path))
        changes = {k: params[k] for k in ("use_sim_time", "real_time_factor") if k in params}
        if changes:
            config = dc.replace(config, sim=dc.replace(config.sim, **changes))
        serve = serve or list(params.get("serve") or []) or None
        stop = threading.Event()
        previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
        sim = SimNode(config, context=ros.context, serve=serve, record=record).start()
        sim.node.get_logger().info(
            f"simulating arms {list(sim.scene.arms)}, serving {list(sim.arms)} (timestep "
            f"{sim.scene.model.opt.timestep} s, control {config.sim.control_rate_hz} Hz, real-time "
            f"factor {config.sim.real_time_factor}, use_sim_time {config.sim.use_sim_time})")
        try:
            while not stop.wait(0.5):
                if sim.shared.error is not None:
                    raise sim.shared.error
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
            sim.close()
    finally:
        ros.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``ros2 run mj_manipulator_ros sim_node --ros-args -p config:=FILE [-p use_sim_time:=true]``."""
    import sys

    return run_sim(None, sys.argv if argv is None else argv)
