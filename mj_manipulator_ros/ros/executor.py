"""MultiArmExecutor: run a multi-arm plan with one shared start stamp and one shared cancel.

One execution:

1. The plan is validated completely against the configuration (nothing is sent otherwise).
2. One thread per arm discovers its action server (all in parallel) and arrives at the gate.
3. When every arm has arrived, the start stamp is computed **once** (now + lead on the
   controllers' clock) and the gate opens; every arm sends its goal with that stamp, none waiting
   on another.
4. The first failure anywhere (rejection, abort, error code, late acceptance, timeout, missing
   server, exception, ``abort()``, Ctrl-C) cancels the scope; every arm with an active goal sends
   a cancel and waits, bounded, for the cancel response and the final result. An arm whose stop
   cannot be confirmed is reported as ``UNCONFIRMED_STOP``.
5. Every thread is joined with a bound; the report is returned.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Callable, Optional

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import (
    ArmReport, ArmStatus, ExecutionReport, ExecutionStatus)
from mj_manipulator_ros.core.sync import CancelScope, Failure, FailureReason, StartGate, StartStamp
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.ros.arm_client import ArmChannel, ArmRun, FeedbackHook
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.spinner import BackgroundSpinner

NodeFactory = Callable[[str], Node]
#: Extra time (s) allowed for joining arm threads beyond every configured bound.
JOIN_SLACK_S = 5.0


class MultiArmExecutor:
    """Executes :class:`MultiArmPlan`s on the configured arms' FollowJointTrajectory servers.

    Args:
        config: arms, actions, limits and execution settings.
        node_factory: makes a node from a name; default: nodes in ``context`` (or in a context
            this executor creates and owns) with ``use_sim_time`` from the config.
        context: an initialised rclpy context to create nodes in (ignored with node_factory).
        preflight: optional ``plan -> None`` check run after validation, raising to refuse.
            The executor never builds one: program entry points pass
            ``mj_manipulator_ros.check.preflight.preflight_for(config)`` (synchronized replay
            through the config's MuJoCo scene when ``execution.preflight_check`` is set).

    Use one executor per process or per combined action server; call :meth:`close` when done.
    Executions are serialised: a second ``execute`` waits for the first to finish.
    """

    def __init__(self, config: ExecutorConfig, node_factory: Optional[NodeFactory] = None,
                 context=None, preflight: Optional[Callable[[MultiArmPlan], None]] = None) -> None:
        self.config = config
        self._owned_context: RosContext | None = None
        if node_factory is None:
            if context is None:
                self._owned_context = RosContext()
                context = self._owned_context.context
            node_factory = self._default_factory(context)
        self._preflight = preflight
        suffix = uuid.uuid4().hex[:6]
        self._clock_node = node_factory(f"mjmr_executor_{suffix}")
        self._clock_spinner = BackgroundSpinner(
            _executor_for(self._clock_node), f"mjmr-executor-clock-{suffix}").start()
        self.channels = {a.name: ArmChannel(a, node_factory(f"mjmr_arm_{a.name}_{suffix}"))
                         for a in config.arms}
        self._run_lock = threading.Lock()
        self._scope_lock = threading.Lock()
        self._scope: CancelScope | None = None
        self.on_feedback: FeedbackHook | None = None
        #: the start stamp of the running execution (None between executions), for tools that
        #: act at a point of the motion (e.g. the HIL stop-latency stage)
        self.current_stamp: StartStamp | None = None

    def _default_factory(self, context) -> NodeFactory:
        use_sim = self.config.execution.use_sim_time

        def make(name: str) -> Node:
            return rclpy.create_node(
                name, context=context,
                parameter_overrides=[Parameter("use_sim_time", Parameter.Type.BOOL, use_sim)])
        return make

    def now(self) -> float:
        """The controllers' clock, s."""
        return self._clock_node.get_clock().now().nanoseconds * 1e-9

    def abort(self, reason: str = "aborted") -> bool:
        """Stop the running execution (every arm canceled, confirmed). Any thread.

        Returns True if an execution was running and this was its first failure.
        """
        with self._scope_lock:
            scope = self._scope
        if scope is None:
            return False
        return scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None, reason))

    def execute(self, plan: MultiArmPlan, record: str | None = None) -> ExecutionReport:
        """Run the plan on every arm it names, synchronized. Blocks until every arm has stopped.

        Args:
            record: if given, /joint_states during the execution are written to this file
                (JSON lines; the input of the ``recorded`` replay mode).

        Raises:
            PlanError: the plan is invalid (nothing was sent).
            ExecutionRefusedError: the pre-flight check refused the plan (nothing was sent).
        """
        validate_plan(plan, self.config)
        if self._preflight is not None:
            self._preflight(plan)
        with self._run_lock:
            if record is None:
                return self._execute(plan)
            from mj_manipulator_ros.ros.joint_state_recorder import JointStateRecorder
            recorder = JointStateRecorder(self._clock_node, record)
            try:
                return self._execute(plan)
            finally:
                recorder.close()

    def _execute(self, plan: MultiArmPlan) -> ExecutionReport:
        s = self.config.execution
        scope = CancelScope()
        gate = StartGate(plan.arm_names, scope)
        runs = {}
        for arm in plan.arm_names:
            channel = self.channels[arm]
            scope.on_cancel(channel.wake)
            runs[arm] = ArmRun(channel, plan[arm], scope, gate, s, self.now, plan.duration,
                               self.on_feedback)
        finished = _Countdown(len(runs))

        def arm_main(arm: str, run: ArmRun) -> None:
            try:
                run.run()
            finally:
                finished.count_down(arm)
        threads = [threading.Thread(target=arm_main, args=(a, r), name=f"mjmr-arm-{a}",
                                    daemon=True) for a, r in runs.items()]
        with self._scope_lock:
            self._scope = scope
        stamp: StartStamp | None = None
        try:
            for t in threads:
                t.start()
            try:
                stamp = self._open_gate(gate, scope, s)
            except KeyboardInterrupt:  # before the gate opened: nothing was sent; stop the arms
                scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None, "interrupted (Ctrl-C)"))
            join_budget = (s.server_wait_s + 2 * s.accept_wait_s + s.start_lead_s
                           + plan.duration * s.timeout_scaling + s.timeout_margin_s
                           + 2 * s.cancel_wait_s + JOIN_SLACK_S)
            self._wait(finished, threads, scope, join_budget)
        finally:
            with self._scope_lock:
                self._scope = None
            self.current_stamp = None
        reports = {a: r.report() for a, r in runs.items()}
        stuck = [f"mjmr-arm-{a}" for a in runs if a not in finished.names]
        for arm in runs:
            if arm not in finished.names:  # every wait in ArmRun is bounded: this is a bug, report it loudly
                reports[arm] = ArmReport(ArmStatus.UNCONFIRMED_STOP, None,
                                         f"arm thread mjmr-arm-{arm} did not end", stop_confirmed=False)
        if stuck and scope.failure is None:
            scope.fail(Failure(None, FailureReason.EXCEPTION, None, f"threads did not end: {stuck}"))
        return ExecutionReport(_overall(reports, scope.failure),
                               None if stamp is None else stamp.seconds, scope.failure, reports)

    def _open_gate(self, gate: StartGate, scope: CancelScope, s) -> StartStamp | None:
        if not gate.wait_all_arrived(timeout=s.server_wait_s + 1.0):
            if not scope.canceled:
                missing = gate.missing
                scope.fail(Failure(missing[0] if missing else None,
                                   FailureReason.SERVER_UNAVAILABLE, None,
                                   f"arms {missing} not ready within {s.server_wait_s + 1.0} s"))
            return None
        now_ns = self._clock_node.get_clock().now().nanoseconds
        if now_ns <= 0:  # sim time with no /clock received yet
            scope.fail(Failure(None, FailureReason.CLOCK_UNAVAILABLE, None,
                               "use_sim_time is set but no /clock message has arrived"))
            return None
        stamp = StartStamp.after(now_ns, s.start_lead_s)
        self.current_stamp = stamp
        gate.open(stamp)
        return stamp

    def _wait(self, finished: "_Countdown", threads: list[threading.Thread], scope: CancelScope,
              budget: float) -> None:
        """Wait (within ``budget`` s) until every arm thread has finished, then join them.

        Ctrl-C (KeyboardInterrupt in this thread) cancels every arm and keeps waiting; the report
        then says ``canceled`` with the reason "interrupted (Ctrl-C)". The wait is on a condition
        the arm threads signal, never an interrupted ``Thread.join`` (after a KeyboardInterrupt
        inside ``join``, CPython may report a running thread as finished: bpo-21822)."""
        deadline = time.monotonic() + budget
        while True:
            try:
                finished.wait(max(0.0, deadline - time.monotonic()))
                break
            except KeyboardInterrupt:
                scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                                   "interrupted (Ctrl-C)"))
        if finished.done:  # every arm has returned: the joins are immediate
            for t in threads:
                t.join(1.0)

    def close(self) -> None:
        """Destroy every node (and the owned context). Idempotent."""
        if self._clock_spinner is not None:
            self._clock_spinner.stop()
            self._clock_spinner = None
            for ch in self.channels.values():
                ch.close()
            self._clock_node.destroy_node()
        if self._owned_context is not None:
            self._owned_context.close()

    def __enter__(self) -> "MultiArmExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Countdown:
    """The arm threads that have finished; waiting on it is safe to interrupt with Ctrl-C."""

    def __init__(self, n: int) -> None:
        self._left = n
        self._cond = threading.Condition()
        self.names: set[str] = set()

    def count_down(self, name: str) -> None:
        with self._cond:
            self.names.add(name)
            self._left -= 1
            self._cond.notify_all()

    @property
    def done(self) -> bool:
        with self._cond:
            return self._left <= 0

    def wait(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._left <= 0, timeout)


def _executor_for(node: Node) -> SingleThreadedExecutor:
    ex = SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    return ex


def _overall(reports: dict[str, ArmReport], failure: Failure | None) -> ExecutionStatus:
    if any(not r.stop_confirmed for r in reports.values()):
        return ExecutionStatus.FAILED
    if failure is None:
        if all(r.status is ArmStatus.SUCCEEDED for r in reports.values()):
            return ExecutionStatus.SUCCEEDED
        return ExecutionStatus.FAILED
    if failure.reason is FailureReason.EXTERNAL_ABORT:
        return ExecutionStatus.CANCELED
    return ExecutionStatus.FAILED
