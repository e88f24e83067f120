"""The execution node: one combined FollowJointTrajectory action server over several arms.

MoveIt (or anything else) sends one trajectory over the joints of several arms to
``~/follow_joint_trajectory`` as if to one controller. The node:

- **rejects** (like joint_trajectory_controller: no result, nothing moves) a goal naming a joint
  of no arm, covering only part of an arm, a tolerance for a joint of no arm, failing plan
  validation or the pre-flight replay (the reason is logged); and a goal arriving while another
  is accepted or running. A goal over some of the arms is replayed against the others held
  where they are measured. No exception leaves a callback: an unexpected one is logged with its
  traceback and the goal rejected (or aborted), and the node serves the next goal;
- passes the goal's ``path_tolerance`` and ``goal_tolerance`` to the arm owning each joint, and
  its ``goal_time_tolerance`` to every arm;
- splits the goal by each arm's ``joint_names`` (arms with none of their joints in the goal are
  left out) and runs the arms through :class:`MultiArmExecutor`: one shared start stamp, one
  shared cancel. The incoming ``header.stamp`` is not used: the executor computes the shared
  stamp (now + ``start_lead_s``) itself;
- publishes feedback merged from the arms' feedback (joint names in the goal's order; the
  desired/actual/error arrays are filled once every arm has reported them);
- on cancel of the combined goal, stops every arm along the plan together (a controlled stop,
  ``MultiArmExecutor.stop``), or, where that is not possible (not yet started, no ramp within
  the limits, a stop already under way), cancels every arm; either way it waits for each stop
  to be confirmed;
- ``~/speed_scaling`` (std_msgs/Float64, 0 < f <= 1) ramps every arm of the running goal to the
  new speed together (``MultiArmExecutor.set_speed``); 0 pauses, a factor while paused resumes;
- ``~/stop``, ``~/pause``, ``~/resume`` (std_srvs/Trigger): a controlled stop, pause and resume
  of the running goal; the response says what happened or why not;
- ``~/continue``, ``~/continue_approach`` (std_srvs/Trigger): after the latest goal ended
  stopped or failed, continue its plan from where the arms stand
  (``MultiArmExecutor.continue_plan``: every arm brought back along its own path to the earliest
  arm's plan time, then the rest of the plan); ``~/continue`` refuses an arm off its plan by
  name, ``~/continue_approach`` first moves it back, checked. The motion runs within the call
  (no goal of the action); the response says how it ended;
- ends SUCCEEDED (error_code 0), CANCELED (0; also a controlled stop the client asked for by
  canceling), or ABORTED with the first failure's error_code (-1 INVALID_GOAL when the failure
  carries none, or when an operator stop ended it) and an error_string naming the arm or stop.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import Float64
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectoryPoint

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import MjManipulatorError
from mj_manipulator_ros.core.goal_timing import GoalTiming
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import ExecutionReport, ExecutionStatus, not_checked_lines
from mj_manipulator_ros.core.sync import CancelScope, Failure, FailureReason
from mj_manipulator_ros.core.tolerances import GoalTolerances
from mj_manipulator_ros.ros.conversion import split_combined, split_tolerances
from mj_manipulator_ros.ros.bag_types import BagTypes
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.ros.action_results import RESULT_TIMEOUT_S, release_request

Result = FollowJointTrajectory.Result


class CombinedTrajectoryServer:
    """The combined action server, on ``node``; spin ``node`` in a MultiThreadedExecutor.

    Args:
        node: node to serve on.
        config: the arms.
        executor: runs the split plans (its nodes are its own).
        action_name: default ``~/follow_joint_trajectory`` (relative to the node).

    One goal at a time: a goal is reserved when the goal callback accepts it, so a second goal
    arriving before the first has started is rejected, never accepted and then aborted. Every
    accepted goal gets its own cancel scope *at acceptance*: a cancel (or :meth:`abort`) at any
    point after that means no arm goal is sent, or every sent one is canceled and confirmed.
    """

    def __init__(self, node: Node, config: ExecutorConfig, executor: MultiArmExecutor,
                 action_name: str = "~/follow_joint_trajectory") -> None:
        self.node = node
        self.config = config
        self.executor = executor
        self.last_report: Optional[ExecutionReport] = None
        self.last_record: Optional[Path] = None   # the latest goal's bag (execution.record_dir)
        self._lock = threading.Lock()
        self._reserved: Optional[_Checked] = None   # the accepted goal not yet finished
        self._scopes: dict[bytes, CancelScope] = {}
        self._early_cancels: set[bytes] = set()    # canceled before their scope existed
        self._feedback_lock = threading.Lock()
        self._goal_handle = None
        self._arm_feedback: dict[str, FollowJointTrajectory.Feedback] = {}
        self._goal_joints: list[str] = []
        if config.execution.record_dir:
            # every goal will be recorded: the bags' type store (rosbags' definitions and
            # hashes, 0.3-0.5 s on 2 slow cores) made now, not between a goal and its stamp
            BagTypes.shared()
        executor.on_feedback = self._on_arm_feedback
        self._speed = node.create_subscription(Float64, "~/speed_scaling", self._on_speed, 10,
                                               callback_group=ReentrantCallbackGroup())
        group = ReentrantCallbackGroup()
        self._services = [
            node.create_service(Trigger, f"~/{name}", getattr(self, f"_on_{name}"),
                                callback_group=group)
            for name in ("stop", "pause", "resume", "continue", "continue_approach")]
        #: the latest goal's plan as it ran (what ``~/continue`` continues)
        self.last_plan = None
        #: the latest ``~/continue``'s account (``core/continuation.ContinuationReport``)
        self.last_continuation = None
        self._server = ActionServer(
            node, FollowJointTrajectory, action_name, self._execute,
            goal_callback=self._on_goal, handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel, callback_group=ReentrantCallbackGroup(),
            result_timeout=RESULT_TIMEOUT_S)

    def _on_goal(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        with self._lock:
            if self._reserved is not None:
                self.node.get_logger().error("rejecting combined goal: another goal is executing")
                return GoalResponse.REJECT
            self._reserved = _Checked(goal, None, {})  # held while this goal is being checked
        arrival, t0 = self.executor.now(), time.monotonic()
        try:
            plan = split_combined(goal.trajectory, self.config)
            tolerances = split_tolerances(goal, self.config, plan.arm_names)
            t1 = time.monotonic()
            plan, said = self.executor.prepare(plan)   # validation, stop limits, pre-flight
            if said and "slowed" in said:
                self.node.get_logger().warning(
                    f"combined goal {said}: it lasts longer than the goal's own time, so a "
                    "client's time bound for the goal must allow for it")
            t2 = time.monotonic()
            self.executor.check_start(plan)  # the arms where it starts, the clocks agreeing
            t3 = time.monotonic()
            timing = GoalTiming(arrival, t1 - t0, t2 - t1, t3 - t2, accepted_at=t3)
        except MjManipulatorError as exc:
            with self._lock:
                self._reserved = None
            self.node.get_logger().error("rejecting combined goal: "
                                         + _with_not_checked(str(exc), self.executor.not_checked))
            return GoalResponse.REJECT
        except Exception as exc:  # noqa: BLE001 - a callback that raises kills the node's spin
            with self._lock:
                self._reserved = None
            self._unexpected("rejecting combined goal", exc)
            return GoalResponse.REJECT
        with self._lock:
            self._reserved = _Checked(goal, plan, tolerances, timing, said)
        return GoalResponse.ACCEPT

    def _on_accepted(self, goal_handle) -> None:
        key = bytes(goal_handle.goal_id.uuid)
        scope = CancelScope()
        with self._lock:
            self._scopes[key] = scope
            early = key in self._early_cancels
            self._early_cancels.discard(key)
        try:
            if early:
                scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                                   "combined goal canceled by its client"))
        finally:
            goal_handle.execute()

    def _on_cancel(self, goal_handle) -> CancelResponse:
        key = bytes(goal_handle.goal_id.uuid)
        with self._lock:
            scope = self._scopes.get(key)
            if scope is None:
                self._early_cancels.add(key)
        if scope is not None:
            try:
                text = "combined goal canceled by its client"
                if not (self.executor.speed.controls(scope) and self.executor.stop(text)):
                    scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None, text))
            except Exception as exc:  # noqa: BLE001 - never out of a callback
                self._unexpected("canceling the combined goal", exc)
        return CancelResponse.ACCEPT

    def abort(self, reason: str) -> None:
        """Stop every accepted goal, whether it has started executing or not (any thread)."""
        with self._lock:
            scopes = list(self._scopes.values())
        for scope in scopes:
            scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None, reason))
        self.executor.abort(reason)

    def _execute(self, goal_handle) -> Result:
        key = bytes(goal_handle.goal_id.uuid)
        with self._lock:
            checked, scope = self._reserved, self._scopes.get(key)
        try:
            if checked is None or checked.goal is not goal_handle.request or scope is None:
                goal_handle.abort()
                return Result(error_code=Result.INVALID_GOAL,
                              error_string="goal was not accepted by this server's goal callback")
            with self._feedback_lock:
                self._goal_handle = goal_handle
                self._arm_feedback = {}
                self._goal_joints = list(goal_handle.request.trajectory.joint_names)
            record = None
            if self.config.execution.record_dir:
                stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
                record = Path(self.config.execution.record_dir) / f"{stamp}_{key.hex()[:8]}"
                self.last_record = record
            checked = dataclasses.replace(checked, timing=dataclasses.replace(
                checked.timing, to_execute_s=time.monotonic() - checked.timing.accepted_at))
            self.last_plan = checked.plan
            report = self.executor.execute(checked.plan, scope=scope, record=record,
                                           tolerances=checked.tolerances, checked=True,
                                           stop_limits=checked.stop_limits)
        except Exception as exc:  # noqa: BLE001 - checked in _on_goal; report anything else
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string=f"{type(exc).__name__}: {exc}")
        finally:
            with self._feedback_lock:
                self._goal_handle = None
            with self._lock:
                self._reserved = None
                self._scopes.pop(key, None)
            release_request(goal_handle)   # kept 15 min for its result: no message with it
        self.last_report = report
        timing = checked.timing.text(report.start_stamp, report.phase_times, report.start_lead_s)
        # (rclpy ties a logger call site to one severity: two calls, not one conditional)
        if report.succeeded:
            self.node.get_logger().info(f"combined goal: {report.summary()}\n  {timing}")
        else:
            self.node.get_logger().error(f"combined goal: {report.summary()}\n  {timing}")
        if report.status is ExecutionStatus.SUCCEEDED:
            goal_handle.succeed()
            return Result(error_code=Result.SUCCESSFUL, error_string=timing)
        message = _failure_text(report)
        if goal_handle.is_cancel_requested and report.status in (ExecutionStatus.CANCELED,
                                                                 ExecutionStatus.STOPPED):
            goal_handle.canceled()
            return Result(error_code=Result.SUCCESSFUL, error_string=message)
        goal_handle.abort()
        code = report.first_failure.error_code if report.first_failure else None
        return Result(error_code=code if code else Result.INVALID_GOAL, error_string=message)

    def _on_speed(self, msg: Float64) -> None:
        """``~/speed_scaling`` (0 <= f <= 1): every arm of the running goal to the new speed
        together; 0 pauses, a factor while paused resumes."""
        try:
            changed = self.executor.set_speed(float(msg.data))
        except ValueError as exc:
            self.node.get_logger().error(f"speed_scaling: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - never out of a callback
            self._unexpected("speed_scaling", exc)
            return
        answer = self.executor.last_answer()
        self.node.get_logger().info(f"speed_scaling {msg.data:g}: " + (
            answer.text() if answer is not None else
            "every arm re-timed" if changed else "not applied"))

    def _on_stop(self, request, response):
        """``~/stop``: a controlled stop of the running goal (a cancel where impossible)."""
        return self._trigger(response, "stop", lambda: self.executor.stop("stop requested (~/stop)"))

    def _on_pause(self, request, response):
        """``~/pause``: stop along the plan and hold until ``~/resume``."""
        return self._trigger(response, "pause", lambda: self.executor.pause("~/pause"))

    def _on_resume(self, request, response):
        """``~/resume``: the checks made before a start, then on along the plan."""
        return self._trigger(response, "resume", self.executor.resume)

    def _on_continue(self, request, response):
        """``~/continue``: the latest goal's plan from where the arms stand (an arm off its
        plan refused by name)."""
        return self._continue(response, approach=False)

    def _on_continue_approach(self, request, response):
        """``~/continue_approach``: as ``~/continue``, an arm off its plan first moved back."""
        return self._continue(response, approach=True)

    def _continue(self, response, approach: bool):
        with self._feedback_lock:
            running = self._goal_handle is not None
        plan, last = self.last_plan, self.last_report
        try:
            if running or plan is None or last is None or last.succeeded:
                why = ("a goal is running" if running else "no goal ran yet" if plan is None
                       else "the latest goal succeeded: nothing to continue")
                response.success, response.message = False, f"continue: {why}"
            else:
                done = self.executor.continue_plan(plan, approach=approach)
                self.last_continuation = done
                # what a next ~/continue continues from: the continuation's own end
                self.last_report = done.rest or done.retrace or done.approach
                end = done.rest or done.retrace or done.approach
                response.success = done.succeeded
                part = next((n for n in ("rest", "retrace", "approach")
                             if getattr(done, n) is end), "")
                why = "" if end is None or end.first_failure is None else \
                    f" ({end.first_failure.reason.value}: {end.first_failure.error_string})"
                response.message = (
                    f"continue: {'succeeded' if done.succeeded else 'did not complete'}; "
                    + done.summary().splitlines()[0]
                    + ("" if end is None or done.succeeded else
                       f"; {part}: {end.summary().splitlines()[0]}{why}"))
        except MjManipulatorError as exc:
            response.success, response.message = False, f"continue refused: {exc}"
        except Exception as exc:  # noqa: BLE001 - never out of a callback
            self._unexpected("continue", exc)
            response.success, response.message = False, f"continue: {type(exc).__name__}: {exc}"
        if response.success:
            self.node.get_logger().info(response.message)
        else:
            self.node.get_logger().warning(response.message)
        return response

    def _trigger(self, response, what: str, act):
        try:
            done = act()
            response.success = bool(done)
            answer = self.executor.last_answer()   # this thread's: applied, or why not
            response.message = answer.text() if answer is not None else \
                f"{what}: {'done' if done else 'not applied'}"
        except MjManipulatorError as exc:
            response.success, response.message = False, f"{what} refused: {exc}"
        except Exception as exc:  # noqa: BLE001 - never out of a callback
            self._unexpected(what, exc)
            response.success, response.message = False, f"{what}: {type(exc).__name__}: {exc}"
        if response.success:  # one severity per call site (rclpy)
            self.node.get_logger().info(response.message)
        else:
            self.node.get_logger().warning(response.message)
        return response

    def _on_arm_feedback(self, arm: str, feedback: FollowJointTrajectory.Feedback) -> None:
        try:
            with self._feedback_lock:
                handle = self._goal_handle
                if handle is None:
                    return
                self._arm_feedback[arm] = feedback
                merged = _merge(self._goal_joints, self._arm_feedback)
            handle.publish_feedback(merged)
        except Exception as exc:  # noqa: BLE001 - feedback is a courtesy; the run goes on
            self._unexpected(f"merging arm {arm!r}'s feedback", exc)

    def _unexpected(self, what: str, exc: BaseException) -> None:
        """Log an exception no callback may let out (it would end the node's spin thread and
        leave every later goal unanswered)."""
        self.node.get_logger().error(
            f"{what}: unexpected {type(exc).__name__}: {exc}\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def destroy(self) -> None:
        self.node.destroy_subscription(self._speed)
        for service in self._services:
            self.node.destroy_service(service)
        self._server.destroy()


@dataclass(frozen=True)
class _Checked:
    """The reserved goal: its request, its plan split per arm and its tolerances per arm."""

    goal: object
    plan: Optional[MultiArmPlan]
    tolerances: Mapping[str, GoalTolerances]
    timing: Optional[GoalTiming] = None   # its checks before acceptance
    stop_limits: str = ""                  # what the stop limits did to it (prepare)


def _failure_text(report: ExecutionReport) -> str:
    f = report.first_failure
    head = "failed" if f is None else (
        f"arm '{f.arm}': {f.reason.value}" if f.arm else f"{f.reason.value}")
    if f is not None and f.error_string:
        head += f": {f.error_string}"
    unconfirmed = report.unconfirmed_arms
    if unconfirmed:
        head += f"; STOP NOT CONFIRMED for {unconfirmed}"
    return _with_not_checked(head, report.not_checked)


def _with_not_checked(text: str, not_checked: tuple[str, ...]) -> str:
    """``text`` with the configured pairs the pre-flight check skipped, one per line, unless it
    lists them already (a pre-flight refusal's replay report does)."""
    lines = [line for line in not_checked_lines(not_checked) if line.strip() not in text]
    return "\n".join([text, *lines])


def _merge(goal_joints: list[str], per_arm: dict) -> FollowJointTrajectory.Feedback:
    merged = FollowJointTrajectory.Feedback()
    merged.joint_names = list(goal_joints)
    if per_arm:
        latest = max(per_arm.values(), key=lambda f: (f.header.stamp.sec, f.header.stamp.nanosec))
        merged.header = latest.header
        if hasattr(merged, "index"):  # control_msgs >= 6.3 (Kilted); not in Jazzy's layout
            merged.index = min(f.index for f in per_arm.values())
    for part in ("desired", "actual", "error"):
        by_joint = {}
        for fb in per_arm.values():
            point = getattr(fb, part)
            if len(point.positions) == len(fb.joint_names):
                by_joint.update(zip(fb.joint_names, zip(point.positions, point.velocities or
                                                        [0.0] * len(fb.joint_names))))
        if all(j in by_joint for j in goal_joints):
            setattr(merged, part, JointTrajectoryPoint(
                positions=[by_joint[j][0] for j in goal_joints],
                velocities=[by_joint[j][1] for j in goal_joints]))
    return merged
