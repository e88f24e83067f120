"""MultiArmExecutor: run a multi-arm plan with one shared start stamp and one shared cancel.

One execution:

1. The plan is validated completely against the configuration (nothing is sent otherwise).
2. One thread per arm discovers its action server (all in parallel) and arrives at the gate.
3. When every arm has arrived, the start stamp is computed **once** (now + lead on the
   controllers' clock) and the gate opens; every arm sends its goal with that stamp, none waiting
   on another.
4. The first failure stops every arm, by the stop it calls for (``core/stop_policy.py``;
   docs/executor.md, "Which stop when"). An arm's goal that ends failed (its controller holds
   it) and a tracking or progress-skew violation of the watch: a **controlled stop**, every
   other arm ramped to rest along the plan on one plan time, unless
   ``execution.cancel_peers_on_failure`` or no ramp within the limits exists. Everything else
   (rejection, late acceptance, timeout, missing server, stale or invalid joint states, a
   velocity limit, an exception, ``abort()``, Ctrl-C): the scope is **canceled**, every arm with
   an active goal sends a cancel and waits, bounded, for the cancel response and the final
   result. An arm whose stop cannot be confirmed is reported as ``UNCONFIRMED_STOP``.
5. Every thread is joined with a bound; the report is returned.

Steps 2-5 are one ``ExecutionRun`` (``ros/execution_run.py``), made for each plan run and
dropped after; this class owns what outlives a run (the nodes, the joint-state monitor, the
speed, the hold before the start, the pre-flight check) and the phases of step 1 and the
start checks.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Callable, Mapping, Optional

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from mj_manipulator_ros.core.approach import approach_plan, approach_tolerances
from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.continuation import ContinuationReport
from mj_manipulator_ros.core.errors import (
    ExecutionRefusedError, MjManipulatorError, RampLimitError, StartStateError)
from mj_manipulator_ros.core.answer import Answer, Refusal
from mj_manipulator_ros.core.execution_phase import ExecutionPhase, MotionPhase, PhaseLog
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_speed import PlanSpeed
from mj_manipulator_ros.core.report import ExecutionReport
from mj_manipulator_ros.core.run_outcome import not_sent_report
from mj_manipulator_ros.core.sync import (
    INTERRUPTED, CancelScope, Failure, FailureReason, StartStamp, interrupts_cancel)
from mj_manipulator_ros.core.tolerances import GoalTolerances
from mj_manipulator_ros.core.validation import check_speed_factor, validate_plan
from mj_manipulator_ros.ros.arm_client import ArmChannel, FeedbackHook
from mj_manipulator_ros.ros.black_box import BlackBox
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.conversion import trajectory_points
from mj_manipulator_ros.ros.execution_run import JOIN_SLACK_S, ExecutionRun, RunParts
from mj_manipulator_ros.ros.joint_state_monitor import JointStateMonitor
from mj_manipulator_ros.ros.spinner import BackgroundSpinner
from mj_manipulator_ros.ros.start_check import StartCheck

NodeFactory = Callable[[str], Node]

#: how often every arm's action server is looked for between executions, s (steady clock)
DISCOVERY_WATCH_S = 0.1
#: the bound on joining the thread that makes a plan's goal points beside the gate, s (a
#: 1,401-point arm takes about 10 ms)
POINTS_JOIN_S = 10.0
#: the execution's phases once its stamp was made: a pause there with the motion idle comes
#: after the motion ended, never before its start
_MOTION_BEGUN = frozenset({ExecutionPhase.RUNNING, ExecutionPhase.OBSERVING, ExecutionPhase.DONE})


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
        # every arm's action server noticed as it appears, between executions too (on this
        # machine's steady clock, whatever the controllers' clock): a first goal does not wait
        # the whole discovery settle after a server seen long before
        self._discovery_watch = self._clock_node.create_timer(
            DISCOVERY_WATCH_S, self._note_servers, clock=Clock(clock_type=ClockType.STEADY_TIME))
        #: what the arms report (JointState), for the checks made before stamping
        self.monitor = JointStateMonitor(self._clock_node, {a.joint_states_topic for a in config.arms},
                                         self.now, names=config.names_on_topics())
        self.start_check = StartCheck(config, self.monitor)
        #: always recording (``ros/black_box.py``): an execution that fails, stops or is
        #: canceled after a goal was sent leaves a file its report names; None when
        #: ``execution.black_box_s`` is 0
        self.black_box: BlackBox | None = (
            BlackBox(self._clock_node, config, self.monitor.motion)
            if config.execution.black_box_s > 0 else None)
        if self.black_box is not None:
            self.monitor.raw_sink = self.black_box.keep
        #: the report of the approach move of the latest ``execute(approach=True)``, if one ran
        self.last_approach_report: ExecutionReport | None = None
        #: the latest execution's report (None before the first)
        self.last_report: ExecutionReport | None = None
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
        self._answers = threading.local()          # each thread's last answer (last_answer)
        self._held_changed = threading.Condition(self._hold_lock)
        self._stuck: set[str] = set()              # arms whose thread outlived its join
        self._closed = False
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
        #: the latest run (``ros/execution_run.py``: its arms' runs, its watch, its withdrawn
        #: verdicts), kept until the next; None before the first
        self.last_run: ExecutionRun | None = None
        self._running: ExecutionRun | None = None   # the run in progress
        #: what every run uses of this executor
        self._parts = RunParts(config, self.channels, self.monitor, self.speed, self.now,
                               lambda: self._clock_node.get_clock().now().nanoseconds,
                               self._begin_motion, preflight is not None, self.not_checked,
                               None if self.black_box is None else self.black_box.keep_feedback)

    @staticmethod
    def _default_factory(context, use_sim: bool) -> NodeFactory:
        def make(name: str) -> Node:
            return rclpy.create_node(
                name, context=context,
                parameter_overrides=[Parameter("use_sim_time", Parameter.Type.BOOL, use_sim)])
        return make

    def _note_servers(self) -> None:
        for ch in self.channels.values():
            try:
                ch.note_server()
            except Exception:  # noqa: BLE001 - a timer callback: the arm's run checks again
                pass

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

    def check(self, plan: MultiArmPlan) -> MultiArmPlan:
        """Validation, the stop limits and the pre-flight check, as :meth:`execute` runs them
        (nothing is sent). Returns the plan as it would run: ``plan`` itself, or slowed where a
        stop from some plan time would pass a stop limit (``execution.max_stop_time_s``,
        ``execution.max_stop_distance_m``, per arm under ``arms[]``; ``check/stop_fit``).

        Raises:
            PlanError: the plan is invalid, or (StartStateError) the plan leaves out an arm
                whose position the pre-flight check needs and cannot measure.
            ExecutionRefusedError: the pre-flight check refused it, or no speed fits a stop
                limit (StopLimitError), or stop limits are set and no gate enforces them.
        """
        plan, _said = self.prepare(plan)
        return plan

    def prepare(self, plan: MultiArmPlan) -> tuple[MultiArmPlan, str]:
        """:meth:`check`: the plan as it will run, and what the stop limits did to it ('' when
        none is set; ``StopFit.summary`` otherwise)."""
        validate_plan(plan, self.config)
        said = ""
        if any(v is not None for a in plan.arm_names for v in self.config.stop_limits(a)):
            fit = getattr(self._preflight, "fit_stop_limits", None)
            if fit is None:
                raise ExecutionRefusedError(
                    "stop limits are set (max_stop_time_s / max_stop_distance_m) and no pre-flight "
                    "gate enforces them (execution.preflight_check off, or a gate without "
                    "fit_stop_limits): nothing was sent")
            with self._preflight_lock:
                fitted = fit(plan)
            plan, said = fitted.plan, fitted.summary()
        if self._preflight is not None:
            others = [a for a in self.config.arm_names if a not in plan.arm_names]
            held = self.start_check.measured(others) if others else {}
            grippers = self.start_check.grippers(self.config.arm_names)
            # the goals' points are made while the gate runs (its replays are C with the GIL
            # released): the arms' threads find them made
            points = threading.Thread(target=lambda: [trajectory_points(plan[a])
                                                      for a in plan.arm_names],
                                      name="mjmr-goal-points", daemon=True)
            points.start()
            try:
                with self._preflight_lock:
                    self._preflight(plan, held, grippers)
            finally:
                points.join(POINTS_JOIN_S)   # Python objects only: done long before
        return plan, said

    def readiness(self) -> Optional[str]:
        """What a goal's checks need from the arms, all there now: every arm's action server in
        the graph, its joint states received and (where ``max_clock_offset_s`` is set) its
        controller clock's offset estimable. None while any is missing; else a line saying so
        (offsets in ms). Reads only: nothing is sent."""
        offsets = {}
        for arm in self.config.arms:
            joints = arm.joint_names
            if not self.channels[arm.name].server_ready() or \
                    len(self.monitor.received(joints)) < len(joints):
                return None
            if self.config.execution.max_clock_offset_s > 0:
                offset = self.monitor.clock_offset(joints)
                if offset is None:
                    return None
                offsets[arm.name] = offset
        clocks = (", clock offsets " + ", ".join(f"{a} {o * 1e3:+.1f} ms"
                                                 for a, o in offsets.items())) if offsets else ""
        return (f"ready: every arm's action server and joint states are there"
                f" ({list(self.config.arm_names)}{clocks})")

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
                checked: bool = False, approach: bool = False,
                stop_limits: str = "") -> ExecutionReport:
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
            checked: :meth:`check` already passed for this very plan (skip it): the plan it
                returned (slowed for the stop limits where they asked for it).
            approach: when an arm is not at the plan's start, first run a synchronized
                rest-to-rest move there (within the limits, checked like any plan; its report
                in :attr:`last_approach_report`); the plan runs only if that succeeded.
            stop_limits: with ``checked``, what :meth:`prepare` said of the stop limits: kept
                in the report (and the copy in its bag), as it is when this call checks.

        Raises:
            PlanError: the plan is invalid, or (StartStateError) an arm is not where it starts
                (nothing was sent).
            ConfigError: ``record`` cannot hold this run's bag (too little free space, or a
                path through a file): nothing was sent.
            ExecutionRefusedError: the pre-flight check refused the plan, no speed fits a stop
                limit (StopLimitError), a controller's clock is too far off (ClockOffsetError),
                or the executor is closed or has an arm thread that never ended (nothing was
                sent).
        """
        scope = scope or CancelScope()
        log = self.phases = PhaseLog()
        said: dict = {"stop_limits": stop_limits if checked else ""}
        # the black box keeps the window before whatever moment this execution fails at
        held = self.black_box.hold() if self.black_box is not None else None
        began = (time.monotonic(), self.now())   # both clocks: their rate over the execution
        try:
            report = self._execute_phases(plan, record, scope, tolerances, checked, approach, log,
                                          said)
        except BaseException:
            if held is not None:
                self.black_box.release(held)
            raise
        finally:
            log.enter(ExecutionPhase.DONE, time.monotonic(), "the report is made")
        # a run's report has its phase times already (its bag holds that report); a report
        # made before any goal was sent gets them here; what the stop limits did, here
        if not report.phase_times:
            report = dataclasses.replace(report, phase_times=log.durations())
        if said.get("stop_limits"):
            report = dataclasses.replace(report, stop_limits=said["stop_limits"])
        report = self._to_black_box(report, scope, held, began)
        self.last_report = report
        return report

    def continue_plan(self, plan: MultiArmPlan, approach: bool = False,
                      hints: Mapping[str, float] | None = None) -> ContinuationReport:
        """Continue ``plan`` after a stop (a controlled stop, a pause that timed out, a
        peer-failed stop, an operator's stop), nothing restarted: every arm located on its plan
        from its measured position, those ahead brought back along their own paths to the
        earliest arm's plan time, then the rest of the plan from rest there; each part
        validated, gated and start-checked as any plan (``ros/plan_continuation.py``).

        Args:
            approach: an arm off its plan is first moved to its plan's nearest configuration
                (rest to rest, checked); without it, such an arm is refused by name.
            hints: arm -> plan time it is expected near, to choose where a path passes one pose
                more than once (default: from :attr:`last_report` when it ran this plan).

        Raises:
            OffPlanError: an arm stands off its plan (without ``approach``): nothing was sent.
            PlanError, ExecutionRefusedError: as :meth:`execute`, for any part.
        """
        from mj_manipulator_ros.ros.plan_continuation import continue_plan
        return continue_plan(self, plan, approach, hints)

    def _to_black_box(self, report: ExecutionReport, scope: CancelScope, held: int | None,
                      began: tuple[float, float]) -> ExecutionReport:
        """An execution that did not succeed (failed, stopped, canceled) after a goal was sent:
        its black box file is written (a thread of the black box's) and named in the report.
        ``began``: (monotonic, controllers' clock) when the execution was called."""
        run = self.last_run
        if self.black_box is None:
            return report
        if (report.succeeded or run is None
                or not any(r.goal_sent_at is not None for r in report.arms.values())):
            self.black_box.release(held)
            return report
        # the moment it went wrong, the earliest of: the first failure's evidence, the first
        # controlled stop's request (a watch trip stops the arms first; the scope may fail only
        # later, when a stop is not confirmed), the scope's failure. The report's times are on
        # the controllers' clock (sim time may run at another pace): seconds ago on this
        # machine's clock by the two clocks' rate over the execution
        mono, now = time.monotonic(), self.now()
        rate = _clock_rate(began, mono, now)
        agos = [] if scope.canceled_at_monotonic is None else \
            [mono - scope.canceled_at_monotonic]
        moments = [r.requested_at for r in report.stops[:1]]
        if report.first_failure is not None and report.first_failure.evidence_at is not None:
            moments.append(report.first_failure.evidence_at)
        agos += [(now - t) / rate for t in moments]
        ago = max(0.0, max(agos, default=0.0))
        path = self.black_box.dump(report, run.plan, run.arms, now, ago, held, rate)
        return dataclasses.replace(report, black_box_path=str(path))

    def _execute_phases(self, plan: MultiArmPlan, record: str | None, scope: CancelScope,
                        tolerances: Mapping[str, GoalTolerances] | None, checked: bool,
                        approach: bool, log: PhaseLog, said: dict) -> ExecutionReport:
        """:meth:`execute`'s body, moving ``log`` through the phases of
        ``core/execution_phase.py`` (DONE is execute's); what the stop limits did into
        ``said["stop_limits"]``."""
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
                    plan, said["stop_limits"] = self.prepare(plan)
                enter(ExecutionPhase.WAITING)
                if not self._acquire_run_lock(scope):
                    return not_sent_report(plan, scope.failure, self.not_checked)
                self.speed.new_execution()   # the answers from here on are this execution's
                try:
                    if scope.canceled:
                        return not_sent_report(plan, scope.failure, self.not_checked)
                    self.last_approach_report = None
                    if approach:
                        if not self._hold_while_paused(scope, log):
                            return not_sent_report(plan, scope.failure, self.not_checked)
                        enter(ExecutionPhase.APPROACHING)
                        moved = self._approach(plan, scope)
                        if moved is not None:
                            return moved  # the approach did not succeed: the plan is not run
                    while True:   # a pause asked during the start checks: hold, check again
                        if not self._hold_while_paused(scope, log):
                            return not_sent_report(plan, scope.failure, self.not_checked)
                        enter(ExecutionPhase.START_CHECK)
                        try:
                            self.check_start(plan, stop=lambda: scope.canceled)
                        except MjManipulatorError:
                            if scope.canceled:   # cut short by the stop: not the arms' fault
                                return not_sent_report(plan, scope.failure, self.not_checked)
                            raise
                        if scope.canceled:
                            return not_sent_report(plan, scope.failure, self.not_checked)
                        with self._hold_lock:
                            if self._held is None:
                                self._committed = True
                                break
                    if record is None:
                        return self._execute(plan, scope, tolerances or {}, log)
                    return self._execute_recorded(plan, scope, tolerances or {}, record, log,
                                                  said["stop_limits"])
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
                          log: PhaseLog, stop_limits: str = "") -> ExecutionReport:
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
        began = (time.monotonic(), self.now())
        try:
            report = dataclasses.replace(self._execute(plan, scope, tolerances, log),
                                         record_path=str(path), stop_limits=stop_limits)
        finally:
            if report is None:
                recording.abandon()
            else:
                # controllers' seconds per second of this machine's (sim time at another pace)
                mono, now = time.monotonic(), self.now()
                rate = _clock_rate(began, mono, now)
                failed_at = None
                if scope.canceled_at_monotonic is not None:
                    failed_at = now - (mono - scope.canceled_at_monotonic) * rate
                recording.finish(report, self.last_run.arms if self.last_run is not None else {},
                                 now, failed_at, rate)
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
        move = self.check(move)  # validated and replay-checked like any plan
        self.check_start(move, stop)
        # it ends where the plan's start check will pass, or fails by name
        report = self._execute(move, scope, approach_tolerances(self.config, move.arm_names))
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
        """The run itself (``ros/execution_run.py``): the arms' threads, the gate and stamp,
        the wait, the report. ``log``: the execution's phases, moved through stamping, running
        and observing (None: the approach's run, inside the execution's approaching phase)."""
        run = ExecutionRun(self._parts, plan, scope, tolerances, self.on_feedback, log)
        self.last_run = self._running = run
        try:
            if self.black_box is None:
                return run.run()
            with self.black_box.in_motion():   # its writing waits while arms move
                return run.run()
        finally:
            self._running = None
            if run.stuck:
                with self._scope_lock:
                    self._stuck.update(run.stuck)

    @property
    def current_stamp(self) -> StartStamp | None:
        """The start stamp of the running execution (None between executions and before its
        gate opens), for tools that act at a point of the motion (e.g. the HIL stop-latency
        stage)."""
        run = self._running
        return None if run is None else run.stamp

    def _begin_motion(self, run: ExecutionRun, stamp_s: float) -> None:
        """At a run's stamp: the speed begins on it, and a pause asked between the last start
        check and the stamp is applied now, along the plan (the run's gate thread)."""
        with self._hold_lock:
            self.speed.begin(run.plan, run.arms, run.watch.clock, run.scope, stamp_s)
            held, self._held = self._held, None
            if held is not None:   # asked between the last start check and the stamp
                try:
                    self.speed.pause(held)
                except RampLimitError as exc:
                    run.scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                                           f"{held} (controlled stop impossible: {exc}; "
                                           "canceled instead)"))

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
        self._answers.last = None
        if factor == 0:
            return self.pause("speed factor 0")
        check_speed_factor(factor, self.config)
        return self._answered(self.speed.set_speed(factor))

    def stop(self, reason: str = "stop requested") -> bool:
        """A controlled stop of the running execution (IEC 60204-1 category 2; any thread):
        every arm decelerates along the plan, on one plan time, within its limits, and ends at
        rest; the execution ends ``stopped`` with the stop's time and travel in its report.
        Where no controlled stop is possible (nothing running yet, no ramp within the limits)
        it falls back to :meth:`abort` (each controller's cancel: hold). Returns True when the
        running execution will stop (either way)."""
        self._answers.last = None
        try:
            answer = self.speed.stop(reason)
            if answer:
                return self._answered(answer)
            if answer.refusal is Refusal.STOPPING:
                return self._answered(answer)   # stopping along the plan already: no cancel
            why = f"no controlled stop ({answer.why})"
        except RampLimitError as exc:
            why, reason = "no controlled stop within the limits", \
                f"{reason} (controlled stop impossible: {exc}; canceled instead)"
        if self.abort(reason):
            return self._answered(self.speed.record(Answer.yes(
                "stop", f"{why}: canceled instead (each controller holds)", self.now())))
        return self._answered(self.speed.record(Answer.no(
            "stop", Refusal.NOTHING_RUNNING, f"{why}; nothing to cancel (no execution in "
            "progress, or it is ending on an earlier failure)", self.now())))

    def pause(self, reason: str = "pause requested") -> bool:
        """Stop the running execution along the plan, as :meth:`stop`, and hold there until
        :meth:`resume` (at most ``execution.max_pause_s``); no result deadline runs and the
        watch expects the arms to stand. Returns False when nothing is running, or it is
        paused or stopping already.

        Raises:
            RampLimitError: no stop within the limits from here (nothing was sent).
        """
        self._answers.last = None
        with self._hold_lock:
            answer = self.speed.pause(reason)
            if answer:
                return self._answered(answer)
            with self._scope_lock:
                in_progress = bool(self._scopes)
            if in_progress and self.speed.state is MotionPhase.IDLE:
                if self.phases.phase in _MOTION_BEGUN:
                    # its motion ended (the report being made): nothing to pause, nothing to
                    # hold (regression: answered "held before the start", True, and no pause
                    # was ever made)
                    answer = Answer.no("pause", Refusal.NOTHING_RUNNING, "the execution's "
                                       "motion has ended (its report is being made)", self.now())
                elif self._held is None:
                    self._held = reason   # not running yet: nothing is sent until resumed
                    answer = Answer.yes("pause", "before the start: held, nothing is sent until "
                                        "resumed (the start checks run again then)", self.now())
                else:
                    answer = Answer.no("pause", Refusal.HELD, f"held before the start already "
                                       f"({self._held})", self.now())
                self.speed.record(answer)
            return self._answered(answer)

    def resume(self, factor: float | None = None) -> bool:
        """Continue a paused execution from a new shared stamp, ramping up along the plan to
        ``factor`` (default: the speed before the pause). First re-checks what can have
        changed while paused: every arm where it was paused (``start_tolerance_rad``) and the
        controllers' clocks. Returns False when not paused.

        Raises:
            StartStateError, ClockOffsetError: a check failed (still paused; nothing sent).
            PlanCostError: ``factor`` out of range.
        """
        self._answers.last = None
        if factor is not None:
            check_speed_factor(factor, self.config)
        with self._hold_lock:
            if self._held is not None:   # paused before the start: the start checks follow
                self._held = None
                self._held_changed.notify_all()
                return self._answered(self.speed.record(Answer.yes(
                    "resume", "held before the start: the start checks run again, then the plan "
                    "starts", self.now())))
        return self._answered(self.speed.resume(factor))

    def _answered(self, answer: Answer) -> bool:
        """``answer`` as the calling thread's :meth:`last_answer`; its truth."""
        self._answers.last = answer
        return answer.applied

    def last_answer(self) -> Answer | None:
        """The answer the calling thread's latest :meth:`set_speed`, :meth:`stop`,
        :meth:`pause` or :meth:`resume` got: applied, or why not (``core/answer.py``); None
        before any (or when it raised: the error says why)."""
        return getattr(self._answers, "last", None)

    def _check_resume(self, pose: MultiArmPlan) -> None:
        if self.start_check.state_enabled(pose.arm_names):
            self.start_check.check_state(pose)
        self.start_check.check_clocks(pose.arm_names)

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
            if self.black_box is not None:
                self.black_box.close()   # the file being written finished (bounded)
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


def _clock_rate(began: tuple[float, float], mono: float, now: float) -> float:
    """Seconds of the controllers' clock per second of this machine's since ``began``
    ((monotonic, controllers' clock)) until (``mono``, ``now``): 1 on the system clock, the
    simulator's pace on sim time; 1 when it cannot be told (no time passed, a clock at rest)."""
    rate = (now - began[1]) / (mono - began[0]) if mono > began[0] else 1.0
    return rate if rate > 1e-3 else 1.0


def _executor_for(node: Node) -> SingleThreadedExecutor:
    ex = SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    return ex
