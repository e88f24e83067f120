"""MultiArmExecutor: run a multi-arm plan with one shared start stamp and one shared cancel.

One execution:

1. The plan is validated completely against the configuration (nothing is sent otherwise).
2. One thread per arm discovers its action server (all in parallel) and arrives at the gate.
3. When every arm has arrived, the start stamp is computed **once** (now + lead on the
   controllers' clock) and the gate opens; every arm sends its goal with that stamp, none waiting
   on another.
4. The first failure stops every arm, by the stop it calls for (docs/executor.md, "Which stop
   when"). An arm's goal that ends failed (its controller holds it) and a tracking or
   progress-skew violation of the watch: a **controlled stop**, every other arm ramped to rest
   along the plan on one plan time (:meth:`_peer_failed`, :meth:`_fail`), unless
   ``execution.cancel_peers_on_failure`` or no ramp within the limits exists. Everything else
   (rejection, late acceptance, timeout, missing server, stale or invalid joint states, a
   velocity limit, an exception, ``abort()``, Ctrl-C): the scope is **canceled**, every arm with
   an active goal sends a cancel and waits, bounded, for the cancel response and the final
   result. An arm whose stop cannot be confirmed is reported as ``UNCONFIRMED_STOP``.
5. Every thread is joined with a bound; the report is returned.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Callable, Mapping, Optional, Sequence

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from mj_manipulator_ros.core.config import ExecutionSettings, ExecutorConfig
from mj_manipulator_ros.core.execution_phase import ExecutionPhase, PhaseLog
from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.motion_phase import MotionPhase
from mj_manipulator_ros.core.approach import approach_plan
from mj_manipulator_ros.core.errors import (
    ExecutionRefusedError, MjManipulatorError, RampLimitError, StartStateError)
from mj_manipulator_ros.core.execution_watch import ExecutionWatch
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_speed import PlanSpeed
from mj_manipulator_ros.core.report import (
    ArmReport, ArmStatus, ExecutionReport, ExecutionStatus, StopKind, StopRecord)
from mj_manipulator_ros.core.stop_meter import StopMeter
from mj_manipulator_ros.core.sync import (
    INTERRUPTED, CancelScope, Failure, FailureReason, StartGate, StartStamp, interrupts_cancel,
    settle_interrupts)
from mj_manipulator_ros.core.tolerances import GoalTolerances
from mj_manipulator_ros.core.validation import check_speed_factor, validate_plan
from mj_manipulator_ros.ros.arm_client import (
    CHECK_PERIOD_S, WALL_BACKSTOP_FACTOR, WALL_BACKSTOP_S, ArmChannel, ArmRun, FeedbackHook,
    gate_wait_s)
from mj_manipulator_ros.ros.joint_state_monitor import JointStateMonitor
from mj_manipulator_ros.ros.start_check import StartCheck
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.spinner import BackgroundSpinner

NodeFactory = Callable[[str], Node]
#: Extra time (s) allowed for joining arm threads beyond every configured bound.
JOIN_SLACK_S = 5.0
#: how often (s) the watch's freshness check runs while an execution runs
WATCH_TICK_S = 0.02
#: the longest (s) a verdict of the watch waits for the arms' threads to read what was already
#: delivered to them (a controller's result, sent before the joint states judged): they answer
#: within a millisecond unless starved of the CPU
READ_DELIVERED_WAIT_S = 0.05

#: before the start gate opens, how long (s, wall) a Ctrl-C already received may take to be
#: acted on (its handler's thread); past it nothing is sent
SETTLE_INTERRUPTS_S = 2.0

#: after the last result, the joint states are watched until every stopped arm has been still
#: this long (s of its joint-state stamps) ...
STOP_SETTLE_S = 0.05
#: ... or this much wall time has passed (s): the report's measured stop (core/stop_meter.py)
STOP_OBSERVE_S = 0.5

#: which stop a failure the watch finds calls for (docs/executor.md, "Which stop when"): True:
#: a controlled stop along the plan (the arms are still controllable; every configuration
#: passed is one of the synchronized plan); False: every controller's cancel (hold), where the
#: arms' state is unknown or a joint is beyond its limit
CONTROLLED_STOP_REASONS = {
    FailureReason.TRACKING_ERROR: True,
    FailureReason.PROGRESS_SKEW: True,
    FailureReason.VELOCITY_LIMIT: False,
    FailureReason.JOINT_STATES_STALE: False,
    FailureReason.JOINT_STATES_INVALID: False,
}


class MultiArmExecutor:
    """Executes :class:`MultiArmPlan`s on the configured arms' FollowJointTrajectory servers.

    Args:
        config: arms, actions, limits and execution settings.
        node_factory: makes a node from a name; default: nodes in ``context`` (or in a context
            this executor creates and owns) with ``use_sim_time`` from the config.
        context: an initialised rclpy context to create nodes in (ignored with node_factory).
        preflight: optional ``(plan, held, grippers) -> None`` check run after validation,
            raising to refuse; ``held`` maps each configured arm the plan leaves out to its
            measured position (J,) (it stands still there while the plan runs), ``grippers``
            each arm's gripper joint to where it is measured (``arms[].gripper_joints``).
            The executor never builds one: program entry points pass
            ``mj_manipulator_ros.check.preflight.preflight_for(config)`` (synchronized replay
            through the config's MuJoCo scene when ``execution.preflight_check`` is set).

    Use one executor per process or per combined action server; call :meth:`close` when done.
    Executions are serialised: a second ``execute`` waits for the first to finish.
    """

    def __init__(self, config: ExecutorConfig, node_factory: Optional[NodeFactory] = None,
                 context=None, preflight: Optional[Callable[..., object]] = None) -> None:
        self.config = config
        self._owned_context: RosContext | None = None
        channel_factory = node_factory
        if node_factory is None:
            if context is None:
                self._owned_context = RosContext()
                context = self._owned_context.context
            node_factory = self._default_factory(context, self.config.execution.use_sim_time)
            # the arms' nodes read no clock of their own (every time is this executor's
            # clock node's): without use_sim_time they do not each subscribe to /clock, which
            # on a simulator at 500 Hz of sim time is 500+ Python callbacks a second per node
            channel_factory = self._default_factory(context, False)
        self._preflight = preflight
        #: the configured allowed-collision pairs the pre-flight gate skips (``not_checked`` of
        #: the gate, if it says): every report of this executor lists them
        self.not_checked: tuple[str, ...] = tuple(getattr(preflight, "not_checked", ()))
        suffix = uuid.uuid4().hex[:6]
        self._clock_node = node_factory(f"mjmr_executor_{suffix}")
        self._clock_spinner = BackgroundSpinner(
            _executor_for(self._clock_node), f"mjmr-executor-clock-{suffix}").start()
        self.channels = {a.name: ArmChannel(a, channel_factory(f"mjmr_arm_{a.name}_{suffix}"))
                         for a in config.arms}
        #: what the arms report (JointState), for the checks made before stamping
        self.monitor = JointStateMonitor(self._clock_node, {a.joint_states_topic for a in config.arms},
                                         self.now, names=config.names_on_topics())
        self.start_check = StartCheck(config, self.monitor)
        #: the report of the approach move of the latest ``execute(approach=True)``, if one ran
        self.last_approach_report: ExecutionReport | None = None
        self._run_lock = threading.Lock()          # one execution at a time
        self._preflight_lock = threading.Lock()    # one pre-flight check at a time (its MjData)
        self._scope_lock = threading.Lock()
        self._scopes: set[CancelScope] = set()     # every execution in progress, from its call
        #: a pause asked while an execution is in progress but not yet running (validation,
        #: pre-flight, start checks): its reason; nothing is sent until :meth:`resume`
        self._held: str | None = None
        #: past the last start check: a pause asked now is applied as the run begins (the
        #: stamp is being made), no longer a hold before the start
        self._committed = False
        self._hold_lock = threading.Lock()         # orders pause/resume against the start
        self._held_changed = threading.Condition(self._hold_lock)
        self._stuck: set[str] = set()              # arms whose thread outlived its join
        self._closed = False
        self._watch: ExecutionWatch | None = None  # the running execution's watch
        self._last_fresh_tick: float | None = None  # monotonic time of the last freshness check
        self._controlled_failure: Failure | None = None  # a failure stopped along the plan
        #: the phases of the execution running, or of the latest (``core/execution_phase.py``)
        self.phases = PhaseLog()
        #: the running execution's speed: set_speed, stop, pause, resume (core/plan_speed.py)
        #: its changes' goals begin far enough back for the most lagging controller clock
        every_joint = tuple(j for a in config.arms for j in a.joint_names)
        self.speed = PlanSpeed(config, lambda: self._clock_node.get_clock().now().nanoseconds,
                               self._check_resume,
                               clock_lag_s=lambda: self.monitor.stamp_lag(every_joint))
        self.on_feedback: FeedbackHook | None = None
        #: name -> text kept in every recorded bag besides plan, config and report (entry points
        #: with a MuJoCo scene add ``scene_xml`` and ``physics_step``)
        self.record_artifacts: dict[str, str] = {}
        self._last_runs: dict = {}
        #: the watch's verdicts of the latest execution withdrawn because a controller's result,
        #: delivered before the joint states they were read on, ended the arm's goal first
        self.withdrawn_violations: list = []
        #: the start stamp of the running execution (None between executions), for tools that
        #: act at a point of the motion (e.g. the HIL stop-latency stage)
        self.current_stamp: StartStamp | None = None

    @staticmethod
    def _default_factory(context, use_sim: bool) -> NodeFactory:
        def make(name: str) -> Node:
            return rclpy.create_node(
                name, context=context,
                parameter_overrides=[Parameter("use_sim_time", Parameter.Type.BOOL, use_sim)])
        return make

    def now(self) -> float:
        """The controllers' clock, s."""
        return self._clock_node.get_clock().now().nanoseconds * 1e-9

    def abort(self, reason: str = "aborted") -> bool:
        """Stop every execution in progress, from validation on (every arm with a goal canceled
        and confirmed; a plan not yet sent is never sent). Any thread.

        Returns True if an execution was in progress and this was its first failure.
        """
        with self._scope_lock:
            scopes = list(self._scopes)
        first = False
        for scope in scopes:
            first |= scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None, reason))
        return first

    def check(self, plan: MultiArmPlan) -> None:
        """Validation and the pre-flight check, as :meth:`execute` runs them (nothing is sent).

        Raises:
            PlanError: the plan is invalid, or (StartStateError) the plan leaves out an arm
                whose position the pre-flight check needs and cannot measure.
            ExecutionRefusedError: the pre-flight check refused it.
        """
        validate_plan(plan, self.config)
        if self._preflight is not None:
            others = [a for a in self.config.arm_names if a not in plan.arm_names]
            held = self.start_check.measured(others) if others else {}
            grippers = self.start_check.grippers(self.config.arm_names)
            with self._preflight_lock:
                self._preflight(plan, held, grippers)

    def check_start(self, plan: MultiArmPlan, stop: Callable[[], bool] = lambda: False) -> None:
        """The checks made before stamping, on what the arms report (nothing is sent): every
        arm where the plan starts (``start_tolerance_rad``), every controller's clock within
        ``max_clock_offset_s``.

        Raises:
            StartStateError: an arm is not at the plan's first waypoint (or its state is unknown).
            ClockOffsetError: a controller's clock is too far off.
        """
        if self.start_check.state_enabled(plan.arm_names):
            self.start_check.check_state(plan, stop)
        self.start_check.check_clocks(plan.arm_names, stop)

    def execute(self, plan: MultiArmPlan, record: str | None = None,
                scope: CancelScope | None = None,
                tolerances: Mapping[str, GoalTolerances] | None = None,
                checked: bool = False, approach: bool = False) -> ExecutionReport:
        """Run the plan on every arm it names, synchronized. Blocks until every arm has stopped.

        The execution can be stopped from the moment this is called: :meth:`abort`, ``scope``
        failing, or Ctrl-C (in the main thread) during validation, the pre-flight check or the
        wait for a previous execution means no goal is sent; later, every sent goal is canceled
        and its stop confirmed. Ctrl-C never escapes as KeyboardInterrupt while goals may run.

        Args:
            record: if given, a bag directory to create: the run recorded as a rosbag2 (MCAP)
                with joint states, action feedback and status, the goals as sent, the
                executor's events, and plan, config, report (and :attr:`record_artifacts`)
                inside (see ``ros/bag_recorder.py``; the input of the ``recorded`` replay mode).
            scope: the cancel scope to run in (e.g. one the combined action server made when it
                accepted the goal); default a new one.
            tolerances: per arm, path/goal tolerances for its goal.
            checked: :meth:`check` already passed for this very plan (skip it).
            approach: when an arm is not at the plan's start, first run a synchronized
                rest-to-rest move there (within the limits, checked like any plan; its report
                in :attr:`last_approach_report`); the plan runs only if that succeeded.

        Raises:
            PlanError: the plan is invalid, or (StartStateError) an arm is not where it starts
                (nothing was sent).
            ConfigError: ``record`` cannot hold this run's bag (too little free space, or a
                path through a file): nothing was sent.
            ExecutionRefusedError: the pre-flight check refused the plan, a controller's clock
                is too far off (ClockOffsetError), or the executor is closed or has an arm thread
                that never ended (nothing was sent).
        """
        scope = scope or CancelScope()
        log = self.phases = PhaseLog()
        try:
            report = self._execute_phases(plan, record, scope, tolerances, checked, approach, log)
        finally:
            log.enter(ExecutionPhase.DONE, time.monotonic(), "the report is made")
        # a run's report has its phase times already (its bag holds that report); a report
        # made before any goal was sent gets them here
        return report if report.phase_times else dataclasses.replace(
            report, phase_times=log.durations())

    def _execute_phases(self, plan: MultiArmPlan, record: str | None, scope: CancelScope,
                        tolerances: Mapping[str, GoalTolerances] | None, checked: bool,
                        approach: bool, log: PhaseLog) -> ExecutionReport:
        """:meth:`execute`'s body, moving ``log`` through the phases of
        ``core/execution_phase.py`` (DONE is execute's)."""
        def enter(phase: ExecutionPhase) -> None:
            if log.phase is not phase:
                log.enter(phase, time.monotonic())
        with self._scope_lock:
            if self._closed:
                raise ExecutionRefusedError("the executor is closed")
            if self._stuck:
                raise ExecutionRefusedError(
                    f"arm thread(s) {sorted(self._stuck)} of an earlier execution never ended; "
                    "their channels may be in use: make a new executor")
            self._scopes.add(scope)
        try:
            with interrupts_cancel(scope, first=lambda: self.stop(INTERRUPTED)):
                if not checked:
                    enter(ExecutionPhase.VALIDATING)
                    self.check(plan)
                enter(ExecutionPhase.WAITING)
                if not self._acquire_run_lock(scope):
                    return _not_sent(plan, scope, self.not_checked)
                try:
                    if scope.canceled:
                        return _not_sent(plan, scope, self.not_checked)
                    self.last_approach_report = None
                    if approach:
                        if not self._hold_while_paused(scope, log):
                            return _not_sent(plan, scope, self.not_checked)
                        enter(ExecutionPhase.APPROACHING)
                        moved = self._approach(plan, scope)
                        if moved is not None:
                            return moved  # the approach did not succeed: the plan is not run
                    while True:   # a pause asked during the start checks: hold, check again
                        if not self._hold_while_paused(scope, log):
                            return _not_sent(plan, scope, self.not_checked)
                        enter(ExecutionPhase.START_CHECK)
                        try:
                            self.check_start(plan, stop=lambda: scope.canceled)
                        except MjManipulatorError:
                            if scope.canceled:   # cut short by the stop: not the arms' fault
                                return _not_sent(plan, scope, self.not_checked)
                            raise
                        if scope.canceled:
                            return _not_sent(plan, scope, self.not_checked)
                        with self._hold_lock:
                            if self._held is None:
                                self._committed = True
                                break
                    if record is None:
                        return self._execute(plan, scope, tolerances or {}, log)
                    return self._execute_recorded(plan, scope, tolerances or {}, record, log)
                finally:
                    self._run_lock.release()
        finally:
            with self._scope_lock:
                self._scopes.discard(scope)
            with self._hold_lock:
                self._held = None
                self._committed = False

    def hold_next(self, reason: str) -> bool:
        """Hold the execution in progress, or the next one, before its start: nothing is sent
        until :meth:`resume` (any thread; e.g. Ctrl-Z before ``execute`` was called). Returns
        False while an execution is running (use :meth:`pause`) or one is held already."""
        with self._hold_lock:
            if self._held is not None or self.speed.state is not MotionPhase.IDLE:
                return False
            self._held = reason
            return True

    @property
    def held_before_start(self) -> bool:
        """A pause asked before the start holds the execution: nothing is sent until resumed.
        False once past the last start check: a pause asked then is applied as the run begins
        (it pauses along the plan; regression: it was reported as held while the stamp was
        made and the goals sent)."""
        return self._held is not None and not self._committed

    def _hold_while_paused(self, scope: CancelScope, log: PhaseLog) -> bool:
        """Block while a pause asked before the start holds (at most ``execution.max_pause_s``;
        then the execution ends with nothing sent); ``log`` enters HELD when it does. Returns
        False when nothing may be sent."""
        limit = self.config.execution.max_pause_s
        deadline = time.monotonic() + limit
        with self._hold_lock:
            if self._held is not None and not scope.canceled:
                log.enter(ExecutionPhase.HELD, time.monotonic(), f"held: {self._held}")
            while self._held is not None and not scope.canceled:
                left = deadline - time.monotonic()
                if left <= 0:
                    scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                                       f"paused before the start ({self._held}) for longer than "
                                       f"execution.max_pause_s = {limit:g} s: nothing was sent"))
                    self._held = None
                    break
                self._held_changed.wait(min(left, 0.1))  # and look at the scope again
        return not scope.canceled

    def _execute_recorded(self, plan: MultiArmPlan, scope: CancelScope,
                          tolerances: Mapping[str, GoalTolerances], path,
                          log: PhaseLog) -> ExecutionReport:
        from mj_manipulator_ros.ros.execution_recording import (
            ExecutionRecording, check_record_space, expected_bytes, plan_text)

        joints = [j for a in plan.arm_names for j in self.config.arm(a).joint_names]
        text = plan_text(plan)   # made once: sized, then kept
        needed, how = expected_bytes(self.config, plan, self.monitor.rate(joints),
                                     self.record_artifacts, text)
        check_record_space(path, needed, how)  # refused here: nothing was sent
        recording = ExecutionRecording(path, self._clock_node.context, self.config, plan,
                                       self.record_artifacts, text)
        report = None
        try:
            report = dataclasses.replace(self._execute(plan, scope, tolerances, log),
                                         record_path=str(path))
        finally:
            if report is None:
                recording.abandon()
            else:
                failed_at = None
                if scope.canceled_at_monotonic is not None:
                    failed_at = self.now() - (time.monotonic() - scope.canceled_at_monotonic)
                recording.finish(report, self._last_runs, self.now(), failed_at)
        # a record that failed never stopped the arms; the report says so
        return dataclasses.replace(report, record_error=recording.error)

    def _approach(self, plan: MultiArmPlan, scope: CancelScope) -> ExecutionReport | None:
        """Move the arms that are not at the plan's start there. Returns None when the plan may
        run (already there, or moved there), else the report that says why not."""
        if not self.start_check.state_enabled(plan.arm_names):
            return None
        stop = lambda: scope.canceled  # noqa: E731
        measured = self.start_check.measured(plan.arm_names, stop)
        try:
            self.start_check.check_state(plan, stop, measured)
            return None
        except StartStateError:
            pass
        targets = {}
        for arm in plan.arm_names:
            names = list(plan[arm].joint_names)
            targets[arm] = plan[arm].positions[0][[names.index(j)
                                                    for j in self.config.arm(arm).joint_names]]
        move = approach_plan(self.config, measured, targets,
                             self.config.execution.approach_speed_fraction)
        self.check(move)  # validated and replay-checked like any plan
        self.check_start(move, stop)
        report = self._execute(move, scope, {})
        self.last_approach_report = report
        return None if report.succeeded else report

    def _acquire_run_lock(self, scope: CancelScope) -> bool:
        """Wait for a previous execution to end, unless this one is stopped meanwhile."""
        while not self._run_lock.acquire(timeout=0.05):
            if scope.canceled:
                return False
        return True

    def _execute(self, plan: MultiArmPlan, scope: CancelScope,
                 tolerances: Mapping[str, GoalTolerances],
                 log: PhaseLog | None = None) -> ExecutionReport:
        """The run itself: the arms' threads, the gate and stamp, the wait, the report.
        ``log``: the execution's phases, moved through stamping, running and observing (None:
        the approach's run, inside the execution's approaching phase)."""
        s = self.config.execution
        if log is not None:
            log.enter(ExecutionPhase.STAMPING, time.monotonic())
        gate = StartGate(plan.arm_names, scope)
        runs = {}
        for arm in plan.arm_names:
            channel = self.channels[arm]
            scope.on_cancel(channel.wake)
            runs[arm] = ArmRun(channel, plan[arm], scope, gate, s, self.now, plan.duration,
                               self.on_feedback, tolerances.get(arm),
                               None if s.cancel_peers_on_failure or len(plan.arm_names) < 2
                               else (lambda f, sc=scope: self._peer_failed(sc, f)))
        finished = _Countdown(len(runs))
        self._last_runs = runs
        self.withdrawn_violations = []
        self._controlled_failure = None
        meter = StopMeter({a: plan[a].joint_names for a in plan.arm_names})
        self._meter = meter
        scope.on_cancel(lambda: meter.start(self.now()))
        self.speed.on_stop = meter.start

        def arm_main(arm: str, run: ArmRun) -> None:
            try:
                run.run()
            finally:
                finished.count_down(arm)
        threads = [threading.Thread(target=arm_main, args=(a, r), name=f"mjmr-arm-{a}",
                                    daemon=True) for a, r in runs.items()]
        self._watch = ExecutionWatch(plan, 0.0, self.config)  # started with the stamp
        stamp: StartStamp | None = None
        watch: ExecutionWatch | None = None
        try:
            for t in threads:
                t.start()
            watch = self._watch
            stamp = self._open_gate(gate, scope, s, plan, runs)
            if stamp is not None and log is not None:
                log.enter(ExecutionPhase.RUNNING, time.monotonic())
            clock = watch.clock if stamp is not None else None
            started = time.monotonic()
            self._last_fresh_tick = None
            self._wait(finished, threads, scope, lambda: started + self.speed.paused_wall_s()
                       + join_budget(s, self.speed.ramp_total_s + plan.duration / (
                           clock.slowest_moving if clock is not None else 1.0)),
                       tick=(lambda: self._on_tick(runs, scope)) if stamp is not None else None)
            if log is not None and log.phase is ExecutionPhase.RUNNING:
                log.enter(ExecutionPhase.OBSERVING, time.monotonic())
            self._observe_stops(meter, runs)
        finally:
            self.speed.end()
            self.monitor.listener = None
            self._watch = None
            self.current_stamp = None
        reports = {a: r.report() for a, r in runs.items()}
        if stamp is not None:
            self._mark_done(watch, runs)
            reports = {a: dataclasses.replace(r, max_tracking_error=watch.max_tracking_error[a],
                                              max_progress_skew=watch.max_progress_skew,
                                              max_velocity=watch.max_velocity[a])
                       for a, r in reports.items()}
        stuck = [a for a in runs if a not in finished.names]
        for arm in stuck:  # every wait in ArmRun is bounded: this is a bug, report it loudly
            reports[arm] = ArmReport(ArmStatus.UNCONFIRMED_STOP, None,
                                     f"arm thread mjmr-arm-{arm} did not end", stop_confirmed=False)
        if stuck:
            with self._scope_lock:
                self._stuck.update(stuck)
            scope.fail(Failure(None, FailureReason.EXCEPTION, None,
                               f"threads did not end: {[f'mjmr-arm-{a}' for a in stuck]}"))
        stream_failed = watch.violation.stream_failed() \
            if watch is not None and watch.violation is not None else {}
        reports = _with_stop_figures(reports, meter, self.speed.stops, stream_failed)
        failure = self._controlled_failure or scope.failure   # the first one that came
        return ExecutionReport(_overall(reports, failure),
                               None if stamp is None else stamp.seconds, failure, reports,
                               self._preflight is not None, stops=tuple(self.speed.stops),
                               not_checked=self.not_checked,
                               start_lead_s=None if stamp is None else s.start_lead_s,
                               phase_times={} if log is None else log.durations(time.monotonic()))

    def set_speed(self, factor: float) -> bool:
        """Change the speed of the running execution, every arm together (any thread): from a
        new shared stamp (now + start lead) the plan's speed ramps from the current one to
        ``factor`` along the plan, within every joint's velocity and acceleration limits
        (``core/plan_speed.py``); each arm's running goal is replaced, the arms keep one plan
        time between them. 0 pauses (:meth:`pause`); a factor while paused resumes at it.
        Returns False when nothing is running (or the plan will be over first).

        One change at a time: a request made while the previous one (or the start) has not
        reached its stamp is kept, the latest winning, and applied once it has (each change's
        goals begin with the goal the controllers run, which must have been taken up).

        Raises:
            PlanCostError (a ValueError): ``factor`` not 0 and not in [``min_speed_factor``, 1].
            RampLimitError: no ramp within the limits (nothing was sent).
        """
        if factor == 0:
            return self.pause("speed factor 0")
        check_speed_factor(factor, self.config)
        return self.speed.set_speed(factor)

    def stop(self, reason: str = "stop requested") -> bool:
        """A controlled stop of the running execution (IEC 60204-1 category 2; any thread):
        every arm decelerates along the plan, on one plan time, within its limits, and ends at
        rest; the execution ends ``stopped`` with the stop's time and travel in its report.
        Where no controlled stop is possible (nothing running yet, no ramp within the limits)
        it falls back to :meth:`abort` (each controller's cancel: hold). Returns True when the
        running execution will stop (either way)."""
        try:
            if self.speed.stop(reason):
                return True
        except RampLimitError as exc:
            return self.abort(f"{reason} (controlled stop impossible: {exc}; canceled instead)")
        return self.abort(reason)

    def pause(self, reason: str = "pause requested") -> bool:
        """Stop the running execution along the plan, as :meth:`stop`, and hold there until
        :meth:`resume` (at most ``execution.max_pause_s``); no result deadline runs and the
        watch expects the arms to stand. Returns False when nothing is running, or it is
        paused or stopping already.

        Raises:
            RampLimitError: no stop within the limits from here (nothing was sent).
        """
        with self._hold_lock:
            if self.speed.pause(reason):
                return True
            with self._scope_lock:
                in_progress = bool(self._scopes)
            if in_progress and self._held is None and self.speed.state is MotionPhase.IDLE:
                self._held = reason   # not running yet: nothing is sent until resumed
                return True
            return False

    def resume(self, factor: float | None = None) -> bool:
        """Continue a paused execution from a new shared stamp, ramping up along the plan to
        ``factor`` (default: the speed before the pause). First re-checks what can have
        changed while paused: every arm where it was paused (``start_tolerance_rad``) and the
        controllers' clocks. Returns False when not paused.

        Raises:
            StartStateError, ClockOffsetError: a check failed (still paused; nothing sent).
            PlanCostError: ``factor`` out of range.
        """
        if factor is not None:
            check_speed_factor(factor, self.config)
        with self._hold_lock:
            if self._held is not None:   # paused before the start: the start checks follow
                self._held = None
                self._held_changed.notify_all()
                return True
        return self.speed.resume(factor)

    def _check_resume(self, pose: MultiArmPlan) -> None:
        if self.start_check.state_enabled(pose.arm_names):
            self.start_check.check_state(pose)
        self.start_check.check_clocks(pose.arm_names)

    def _start_watch(self, plan: MultiArmPlan, stamp: StartStamp, scope: CancelScope,
                     runs: Mapping[str, ArmRun]) -> None:
        """Watch the joint states from the stamp on: a tracking error or arms out of step fail
        the execution like any failure (every arm canceled and confirmed)."""
        watch = self._watch  # built before the stamp (sampling the plan is off its path)
        watch.set_start(stamp.seconds, self.monitor.received(
            [j for arm in plan.arm_names for j in plan[arm].joint_names]))
        with self._hold_lock:
            self.speed.begin(plan, runs, watch.clock, scope, stamp.seconds)
            held, self._held = self._held, None
            if held is not None:   # asked between the last start check and the stamp
                try:
                    self.speed.pause(held)
                except RampLimitError as exc:
                    scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                                       f"{held} (controlled stop impossible: {exc}; canceled "
                                       "instead)"))

        meter = self._meter

        def on_joint_state(names, positions, msg_stamp: float, received: float,
                           velocities) -> None:
            meter.on_joint_state(names, positions, msg_stamp)
            self._mark_done(watch, runs)
            violation = watch.on_joint_state(names, positions, msg_stamp, received, velocities)
            if violation is not None and not self._result_came_first(watch, violation, runs):
                self._fail(scope, Failure(violation.arm, FailureReason(violation.reason), None,
                                          violation.text))
        self.monitor.listener = on_joint_state

    def _result_came_first(self, watch: ExecutionWatch, violation,
                           runs: Mapping[str, ArmRun]) -> bool:
        """Before the watch's verdict is acted on, every arm's thread reads what has already
        been delivered to it (bounded: ``READ_DELIVERED_WAIT_S``). A controller's result and
        the joint states published after it arrive on different threads here, in either order:
        a goal its controller had already ended, read now, wins. The verdict is withdrawn
        (True) when the arm it names, or another arm with a failed goal, ended meanwhile: the
        controller's own verdict is then the failure, and the next message is judged without
        the ended arms. False: act on it."""
        asked = {a: r.channel.request_read() for a, r in runs.items() if r.out.result_at is None}
        deadline = time.monotonic() + READ_DELIVERED_WAIT_S
        for event in asked.values():
            event.wait(max(0.0, deadline - time.monotonic()))
        ended = [a for a in asked if runs[a].out.result_at is not None]
        if violation.arm not in ended and all(
                runs[a].out.status in (ArmStatus.SUCCEEDED, ArmStatus.STOPPED) for a in ended):
            return False
        self._mark_done(watch, runs)
        watch.withdraw()
        self.withdrawn_violations.append(violation)
        return True

    def _fail(self, scope: CancelScope, failure: Failure) -> None:
        """A failure the watch found: the stop its reason calls for
        (``CONTROLLED_STOP_REASONS``). A controlled stop records the failure (the report's
        first failure, status ``failed``) and stops every arm along the plan; where it cannot
        (no ramp within the limits, a stop already under way) and for every other reason, the
        scope fails: every arm canceled."""
        if CONTROLLED_STOP_REASONS.get(failure.reason, False):
            with self._scope_lock:
                first = self._controlled_failure is None and not scope.canceled
                if first:
                    self._controlled_failure = failure
            if not first:
                return
            try:
                if self.speed.stop(f"{failure.reason.value}: {failure.error_string}"):
                    return
            except RampLimitError:
                pass
        scope.fail(failure)

    def _observe_stops(self, meter: StopMeter, runs: Mapping[str, ArmRun]) -> None:
        """After the last result, keep the joint states coming into ``meter`` until every
        stopped arm has been still for ``STOP_SETTLE_S`` (at most ``STOP_OBSERVE_S`` of wall
        time): the report's measured stop then covers the arm's run-on past its result."""
        requests = _stop_requests({a: r.out for a, r in runs.items()}, self.speed.stops)
        if not requests or self.monitor.listener is None:
            return
        # every goal has ended: the watch has nothing left to judge; only the meter listens
        self.monitor.listener = lambda names, positions, stamp, received, velocities: \
            meter.on_joint_state(names, positions, stamp)
        deadline = time.monotonic() + STOP_OBSERVE_S
        while time.monotonic() < deadline and not all(
                meter.settled(a, at, STOP_SETTLE_S) for a, at in requests.items()):
            time.sleep(0.01)

    def _peer_failed(self, scope: CancelScope, failure: Failure) -> bool:
        """An arm's goal ended failed (its controller holds it): its peers stop along the plan
        (the pre-flight gate's computed stop band certifies one arm holding while its peers
        ramp down). False where they cannot (not running yet, a stop already under way, no
        ramp within the limits): the scope fails, every arm is canceled."""
        with self._scope_lock:
            first = self._controlled_failure is None and not scope.canceled
            if first:
                self._controlled_failure = failure
        if not first or not self.speed.controls(scope):
            return False
        try:
            return self.speed.stop(f"{failure.arm}: {failure.reason.value}: "
                                   f"{failure.error_string}", held=(failure.arm,))
        except RampLimitError:
            return False

    @staticmethod
    def _mark_done(watch: ExecutionWatch, runs: Mapping[str, ArmRun]) -> None:
        """Arms whose result has been read are no longer judged; for a goal its controller
        ended failed, the figures of the states received while its result may have been
        waiting unread are taken back (the arm held against a plan that moved on)."""
        for arm, run in runs.items():
            if run.out.result_at is not None and arm not in watch.done:
                watch.done.add(arm)
                if run.unread_since is not None:
                    watch.forget_since(arm, run.unread_since)

    def _on_tick(self, runs: Mapping[str, ArmRun], scope: CancelScope) -> None:
        """Every ``WATCH_TICK_S`` while an execution runs (the calling thread)."""
        self._check_fresh(runs, scope)
        self.speed.tick()

    def _check_fresh(self, runs: Mapping[str, ArmRun], scope: CancelScope) -> None:
        """The watch's freshness check (no message reports that messages stopped), on this
        process's clock. Skipped right after this thread was itself starved of the CPU: then
        the joint states may be waiting unread, and an arm must not be blamed for it."""
        watch = self._watch
        if watch is None or scope.canceled:
            return
        tick = time.monotonic()
        late = self._last_fresh_tick is not None and \
            tick - self._last_fresh_tick > 0.5 * watch.stale_after
        self._last_fresh_tick = tick
        if late:
            return
        self._mark_done(watch, runs)
        violation = watch.check_fresh(self.now())
        if violation is not None:
            scope.fail(Failure(violation.arm, FailureReason(violation.reason), None,
                               violation.text))

    def _open_gate(self, gate: StartGate, scope: CancelScope, s, plan: MultiArmPlan,
                   runs: Mapping[str, ArmRun]) -> StartStamp | None:
        wait = gate_wait_s(s)
        if not gate.wait_all_arrived(timeout=wait):
            if not scope.canceled:
                missing = gate.missing
                scope.fail(Failure(missing[0] if missing else None,
                                   FailureReason.SERVER_UNAVAILABLE, None,
                                   f"arms {missing} not ready within {wait:.2f} s"))
            return None
        # a Ctrl-C that came before this point is acted on before anything is sent (its thread
        # can be late on a loaded machine); one that cannot be settled sends nothing either
        if not settle_interrupts(SETTLE_INTERRUPTS_S):
            scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                               f"{INTERRUPTED}: not acted on within {SETTLE_INTERRUPTS_S} s"))
        if scope.canceled:
            return None
        now_ns = self._clock_node.get_clock().now().nanoseconds
        if now_ns <= 0:  # sim time with no /clock received yet
            scope.fail(Failure(None, FailureReason.CLOCK_UNAVAILABLE, None,
                               "use_sim_time is set but no /clock message has arrived"))
            return None
        stamp = StartStamp.after(now_ns, s.start_lead_s)
        self.current_stamp = stamp
        self._start_watch(plan, stamp, scope, runs)
        gate.open(stamp)
        return stamp

    @staticmethod
    def _wait(finished: "_Countdown", threads: list[threading.Thread], scope: CancelScope,
              deadline: Callable[[], float], tick: Callable[[], None] | None = None) -> None:
        """Wait (until the monotonic ``deadline()``) until every arm thread has finished, then
        join them. The wait is on a condition the arm threads signal, never an interrupted
        ``Thread.join`` (after a KeyboardInterrupt inside ``join``, CPython may report a running
        thread as finished: bpo-21822). A KeyboardInterrupt that still arrives (a caller's own
        SIGINT handler raising it) cancels every arm and the wait goes on. ``tick`` runs every
        ``WATCH_TICK_S`` meanwhile (the watch's freshness check, a deferred speed change)."""
        step = 1.0 if tick is None else WATCH_TICK_S
        while True:
            try:  # the deadline moves when the speed changes: re-read it every step
                remaining = deadline() - time.monotonic()
                if finished.wait(max(0.0, min(remaining, step))) or remaining <= step:
                    break
                if tick is not None:
                    tick()
            except KeyboardInterrupt:
                scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                                   "interrupted (Ctrl-C)"))
        if finished.done:  # every arm has returned: the joins are immediate
            for t in threads:
                t.join(1.0)

    def close(self, timeout: float | None = None) -> None:
        """Abort any execution in progress, wait (bounded) until it has ended, then destroy every
        node (and the owned context). Idempotent.

        Raises:
            ExecutionRefusedError: an execution did not end within ``timeout`` (default: two
                cancel waits plus slack); nothing was destroyed under it.
        """
        with self._scope_lock:
            if self._closed:
                return
        s = self.config.execution
        self.abort("executor closing")
        bound = 2 * s.cancel_wait_s + JOIN_SLACK_S if timeout is None else timeout
        if not self._run_lock.acquire(timeout=bound):
            raise ExecutionRefusedError(f"an execution is still running {bound:.1f} s after the "
                                        "abort: not closing under it")
        try:
            with self._scope_lock:
                self._closed = True
            self._clock_spinner.stop()
            for ch in self.channels.values():
                ch.close()
            self._clock_node.destroy_node()
            if self._owned_context is not None:
                self._owned_context.close()
        finally:
            self._run_lock.release()

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
        if all(r.status in (ArmStatus.SUCCEEDED, ArmStatus.STOPPED) for r in reports.values()):
            return ExecutionStatus.STOPPED
        return ExecutionStatus.FAILED
    if failure.reason is FailureReason.EXTERNAL_ABORT:
        return ExecutionStatus.CANCELED
    return ExecutionStatus.FAILED


def join_budget(s: ExecutionSettings, duration: float) -> float:
    """Wall-clock bound for joining the arm threads: the sum of every bounded wait an arm makes
    (the result wait with its wall backstop) plus slack. A last line of defence only."""
    result_wait = WALL_BACKSTOP_FACTOR * (s.start_lead_s + duration * s.timeout_scaling
                                          + s.timeout_margin_s) + WALL_BACKSTOP_S
    return (gate_wait_s(s) + 2 * s.accept_wait_s + result_wait + CHECK_PERIOD_S
            + 2 * s.cancel_wait_s + JOIN_SLACK_S)


def _not_sent(plan: MultiArmPlan, scope: CancelScope,
              not_checked: tuple[str, ...]) -> ExecutionReport:
    """The report of an execution stopped before any goal was sent."""
    reports = {a: ArmReport(ArmStatus.NOT_SENT, None, "stopped before any goal was sent")
               for a in plan.arm_names}
    return ExecutionReport(_overall(reports, scope.failure), None, scope.failure, reports,
                           not_checked=not_checked)


def _stop_requests(reports: Mapping[str, ArmReport],
                   stops: Sequence[StopRecord]) -> dict[str, float]:
    """Each stopped arm's stop request time (controllers' clock): the controlled stop's
    request, its cancel request, or (an arm whose controller aborted its goal and holds it) its
    result."""
    controlled = next((r for r in reversed(stops) if r.kind is GoalKind.STOP), None)
    out = {}
    for arm, r in reports.items():
        at = (controlled.requested_at if r.stop is StopKind.CONTROLLED and controlled is not None
              else r.cancel_requested_at if r.stop is StopKind.CANCEL
              else r.result_at if r.status is ArmStatus.ABORTED else None)
        if at is not None:
            out[arm] = at
    return out


def _with_stop_figures(reports: Mapping[str, ArmReport], meter: StopMeter,
                       stops: Sequence[StopRecord],
                       stream_failed: Mapping[str, str]) -> dict[str, ArmReport]:
    """Each stopped arm's report with its stop measured on its joint states
    (:func:`_stop_requests`); an arm whose joint-state stream was the failure
    (``stream_failed``: arm -> why) gets no figures, and why."""
    requests = _stop_requests(reports, stops)
    out = {}
    for arm, r in reports.items():
        if arm in requests and arm in stream_failed:
            out[arm] = dataclasses.replace(r, stop_not_measured=stream_failed[arm])
            continue
        f = meter.figures(arm, requests.get(arm))
        out[arm] = r if f is None else dataclasses.replace(
            r, stop_travel=f.travel, stop_time_s=f.time_s, stop_observed_s=f.observed_s)
    return out
