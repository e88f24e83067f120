"""One execution's run, from its arms' threads to its report: ``ExecutionRun``.

Made by ``MultiArmExecutor`` for each plan it runs (the plan, or the approach move before it)
and dropped after; it owns what one run has: the plan, each arm's run (``ArmRun``, one thread
each), the cancel scope, the start gate and stamp, the execution watch and the stop meter, and
the first failure that was stopped along the plan. The speed of the motion (``PlanSpeed``) is
the executor's, begun at this run's stamp and ended with it.

The threads that act on a run, and what each may do:

- the caller's thread (:meth:`ExecutionRun.run`): starts the arms' threads, opens the gate
  with the stamp, waits for the threads (every ``WATCH_TICK_S``: the watch's freshness check
  and a deferred speed change), observes the stops and makes the report;
- each arm's thread (``ArmRun.run``): its goal, its replacements, its result;
- the executor's clock node (each joint-state message): the watch's verdict, acted on by the
  stop it calls for (``core/stop_policy.py``) once every arm's thread has read what was
  already delivered to it;
- an arm's thread whose goal ended failed: its peers' controlled stop;
- any thread: ``abort`` (the scope fails) and the executor's speed, stop, pause and resume.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Mapping, Optional

from mj_manipulator_ros.core.config import ExecutionSettings, ExecutorConfig
from mj_manipulator_ros.core.errors import RampLimitError
from mj_manipulator_ros.core.execution_phase import ExecutionPhase, PhaseLog
from mj_manipulator_ros.core.execution_watch import ExecutionWatch, Violation
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_speed import PlanSpeed
from mj_manipulator_ros.core.report import ArmReport, ArmStatus, ExecutionReport
from mj_manipulator_ros.core.run_outcome import overall_status, stop_requests, with_stop_figures
from mj_manipulator_ros.core.start_lead import start_lead
from mj_manipulator_ros.core.stop_meter import StopMeter
from mj_manipulator_ros.core.stop_policy import controlled_stop_for, peers_stop_controlled
from mj_manipulator_ros.core.sync import (
    INTERRUPTED, CancelScope, Failure, FailureReason, StartGate, StartStamp, settle_interrupts)
from mj_manipulator_ros.core.tolerances import GoalTolerances, joint_row, replacement_tolerances
from mj_manipulator_ros.ros.arm_client import (
    CHECK_PERIOD_S, WALL_BACKSTOP_FACTOR, WALL_BACKSTOP_S, ArmChannel, ArmRun, FeedbackHook,
    gate_wait_s)
from mj_manipulator_ros.ros.joint_state_monitor import JointStateMonitor

#: Extra time (s) allowed for joining arm threads beyond every configured bound.
JOIN_SLACK_S = 5.0
#: how often (s) the watch's freshness check runs while an execution runs
WATCH_TICK_S = 0.02
#: past the moment a joint would go stale, the check waits this much more (s): a message that
#: arrives exactly then is not missed for a rounding
FRESH_SLACK_S = 0.0005
#: the shortest wait between two checks, s
MIN_STEP_S = 0.0005
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


@dataclasses.dataclass(frozen=True)
class RunParts:
    """What a run uses of its executor (shared by every run of that executor).

    ``now``: the controllers' clock (s); ``now_ns``: the same clock in ns, read for the stamp;
    ``begin_motion(run, stamp_s)``: begins ``speed`` on the run at its stamp (and applies a
    pause asked between the last start check and the stamp); ``checked``: a pre-flight check
    gates every plan; ``not_checked``: the pairs it skips (every report lists them)."""

    config: ExecutorConfig
    channels: Mapping[str, ArmChannel]
    monitor: JointStateMonitor
    speed: PlanSpeed
    now: Callable[[], float]
    now_ns: Callable[[], int]
    begin_motion: Callable[["ExecutionRun", float], None]
    checked: bool
    not_checked: tuple[str, ...]
    #: every arm's feedback as its controller sent it, to the black box (None: none)
    keep_feedback: Optional[Callable[[str, object], None]] = None


class ExecutionRun:
    """One plan run on its arms, synchronized: one stamp, one scope (module docstring).

    Args:
        parts: the executor's parts every run uses.
        plan: the plan (validated and checked already).
        scope: the execution's cancel scope.
        tolerances: per arm, the path and goal tolerances its goal asks for.
        on_feedback: called with each arm's feedback (the executor's hook), or None.
        log: the execution's phases, moved through stamping, running and observing (None: the
            approach's run, inside the execution's approaching phase).
    """

    def __init__(self, parts: RunParts, plan: MultiArmPlan, scope: CancelScope,
                 tolerances: Mapping[str, GoalTolerances],
                 on_feedback: Optional[FeedbackHook] = None,
                 log: Optional[PhaseLog] = None) -> None:
        self.parts, self.plan, self.scope, self.log = parts, plan, scope, log
        s = parts.config.execution
        self.settings: ExecutionSettings = s
        self.gate = StartGate(plan.arm_names, scope)
        controlled = peers_stop_controlled(s, len(plan.arm_names))
        #: each arm's run (its thread's state), by arm name
        self.arms: dict[str, ArmRun] = {}
        for arm in plan.arm_names:
            channel = parts.channels[arm]
            scope.on_cancel(channel.wake)
            names = plan[arm].joint_names
            path = joint_row(parts.config.arm(arm).path_tolerance, s.path_tolerance_rad, names)
            self.arms[arm] = ArmRun(channel, plan[arm], scope, self.gate, s, parts.now,
                                    plan.duration, on_feedback, tolerances.get(arm),
                                    self._peer_failed if controlled else None,
                                    replacement_tolerances(tolerances.get(arm), names, path),
                                    keep_feedback=parts.keep_feedback)
        self.meter = StopMeter({a: plan[a].joint_names for a in plan.arm_names})
        scope.on_cancel(lambda: self.meter.start(parts.now()))
        #: built before the stamp (sampling the plan is off the joint states' path)
        self.watch = ExecutionWatch(plan, 0.0, parts.config)
        #: the start stamp, once the gate opened (None before, and when it never did), and its
        #: lead (s: the measured need, ``core/start_lead.py``)
        self.stamp: StartStamp | None = None
        self.lead_s: float = s.start_lead_s
        #: the watch's verdicts withdrawn because a controller's result, delivered before the
        #: joint states they were read on, ended the arm's goal first
        self.withdrawn_violations: list[Violation] = []
        #: arms whose thread outlived its join
        self.stuck: list[str] = []
        self._lock = threading.Lock()
        self._controlled_failure: Failure | None = None   # a failure stopped along the plan
        self._finished = _Countdown(len(self.arms))
        self._last_fresh_tick: float | None = None

    def run(self) -> ExecutionReport:
        """Run the plan; blocks until every arm's thread has ended (bounded). Returns the
        report."""
        s, speed = self.settings, self.parts.speed
        if self.log is not None:
            self.log.enter(ExecutionPhase.STAMPING, time.monotonic())
        speed.on_stop = self.meter.start
        threads = self._start_threads()
        try:
            self.stamp = self._open_gate()
            if self.stamp is not None and self.log is not None:
                self.log.enter(ExecutionPhase.RUNNING, time.monotonic())
            clock = self.watch.clock if self.stamp is not None else None
            started = time.monotonic()
            try:
                self._wait(threads, lambda: started + speed.paused_wall_s() + join_budget(
                    s, speed.ramp_total_s + self.plan.duration / (
                        clock.slowest_moving if clock is not None else 1.0)),
                    tick=self._on_tick if self.stamp is not None else None,
                    due=self._fresh_due if self.stamp is not None else None)
            finally:   # a run that ran is observed, however its wait ended
                if self.log is not None and self.log.phase is ExecutionPhase.RUNNING:
                    self.log.enter(ExecutionPhase.OBSERVING, time.monotonic())
            self._observe_stops()
        finally:
            speed.end()
            self.parts.monitor.listener = None
        return self._report()

    def _start_threads(self) -> list[threading.Thread]:
        """One thread per arm, started. One that cannot be (the process's thread limit: a
        container's ``pids.max``) fails the execution before anything is sent: it and the arms
        after it end here, those started see the cancel. Returns the threads started."""
        started = []
        for arm, run in self.arms.items():
            thread = threading.Thread(target=self._arm_main, args=(arm, run),
                                      name=f"mjmr-arm-{arm}", daemon=True)
            if not self.scope.canceled:
                try:
                    thread.start()
                    started.append(thread)
                    continue
                except RuntimeError as exc:
                    self.scope.fail(Failure(arm, FailureReason.EXCEPTION, None,
                                            f"arm {arm!r}: its thread could not be started: "
                                            f"{exc}; nothing was sent"))
            first = self.scope.failure
            run.end_unstarted("its thread could not be started: nothing sent"
                              if first is None or first.arm == arm else
                              f"not started: the execution failed first ({first.error_string})")
            self._finished.count_down(arm)
        return started

    def _arm_main(self, arm: str, run: ArmRun) -> None:
        try:
            run.run()
        finally:
            self._finished.count_down(arm)

    def _report(self) -> ExecutionReport:
        reports = {a: r.report() for a, r in self.arms.items()}
        watch = self.watch
        if self.stamp is not None:
            self._mark_done()
            reports = {a: dataclasses.replace(r, max_tracking_error=watch.max_tracking_error[a],
                                              max_progress_skew=watch.max_progress_skew,
                                              max_velocity=watch.max_velocity[a])
                       for a, r in reports.items()}
        self.stuck = [a for a in self.arms if a not in self._finished.names]
        for arm in self.stuck:  # every wait in ArmRun is bounded: this is a bug, report it loudly
            reports[arm] = ArmReport(ArmStatus.UNCONFIRMED_STOP, None,
                                     f"arm thread mjmr-arm-{arm} did not end", stop_confirmed=False)
        if self.stuck:
            self.scope.fail(Failure(None, FailureReason.EXCEPTION, None,
                                    f"threads did not end: {[f'mjmr-arm-{a}' for a in self.stuck]}"))
        stream_failed = watch.violation.stream_failed() if watch.violation is not None else {}
        speed = self.parts.speed
        reports = with_stop_figures(reports, self.meter, speed.stops, stream_failed)
        failure = self._controlled_failure or self.scope.failure   # the first one that came
        return ExecutionReport(
            overall_status(reports, failure), None if self.stamp is None else self.stamp.seconds,
            failure, reports, self.parts.checked, stops=tuple(speed.stops),
            not_checked=self.parts.not_checked,
            start_lead_s=None if self.stamp is None else self.lead_s,
            phase_times={} if self.log is None else self.log.durations(time.monotonic()),
            speed_changes_dropped=tuple(speed.dropped), requests=tuple(speed.answers))

    # -- the stamp -------------------------------------------------------------------------

    def _open_gate(self) -> StartStamp | None:
        """When every arm has arrived at the gate: one stamp (now + start lead: the arms'
        measured need, ``core/start_lead.py``), the watch started on it, the speed begun, the
        gate opened. None when nothing may be sent."""
        scope, s = self.scope, self.settings
        wait = gate_wait_s(s)
        if not self.gate.wait_all_arrived(timeout=wait):
            if not scope.canceled:
                missing = self.gate.missing
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
        now_ns = self.parts.now_ns()
        if now_ns <= 0:  # sim time with no /clock received yet
            scope.fail(Failure(None, FailureReason.CLOCK_UNAVAILABLE, None,
                               "use_sim_time is set but no /clock message has arrived"))
            return None
        self.lead_s = start_lead({a: r.lead_need for a, r in self.arms.items()},
                                 s.start_lead_floor_s, s.start_lead_s)
        for run in self.arms.values():
            run.lead_s = self.lead_s
        stamp = StartStamp.after(now_ns, self.lead_s)
        self._start_watch(stamp)
        # public (``current_stamp``) only once the speed has begun on it: a request timed on
        # the stamp (a speed change in the lead) was answered "nothing runs" in between
        self.stamp = stamp
        self.gate.open(stamp)
        return stamp

    def _start_watch(self, stamp: StartStamp) -> None:
        """Watch the joint states from the stamp on; begin the speed at the stamp."""
        plan, monitor = self.plan, self.parts.monitor
        self.watch.set_start(stamp.seconds, monitor.received(
            [j for arm in plan.arm_names for j in plan[arm].joint_names]))
        self.parts.begin_motion(self, stamp.seconds)
        monitor.listener = self._on_joint_state

    # -- the watch's verdicts and the stop each calls for -----------------------------------

    def _on_joint_state(self, names, positions, msg_stamp: float, received: float,
                        velocities) -> None:
        """Each joint-state message (the executor's clock node's thread)."""
        self.meter.on_joint_state(names, positions, msg_stamp)
        self._mark_done()
        violation = self.watch.on_joint_state(names, positions, msg_stamp, received, velocities)
        if violation is not None and not self._result_came_first(violation):
            self._fail(Failure(violation.arm, FailureReason(violation.reason), None,
                               violation.text, violation.evidence_at))

    def _result_came_first(self, violation: Violation) -> bool:
        """Before the watch's verdict is acted on, every arm's thread reads what has already
        been delivered to it (bounded: ``READ_DELIVERED_WAIT_S``). A controller's result and
        the joint states published after it arrive on different threads here, in either order:
        a goal its controller had already ended, read now, wins. The verdict is withdrawn
        (True) when the arm it names, or another arm with a failed goal, ended meanwhile: the
        controller's own verdict is then the failure, and the next message is judged without
        the ended arms. False: act on it."""
        runs = self.arms
        asked = {a: r.channel.request_read() for a, r in runs.items() if r.out.result_at is None}
        deadline = time.monotonic() + READ_DELIVERED_WAIT_S
        for event in asked.values():
            event.wait(max(0.0, deadline - time.monotonic()))
        ended = [a for a in asked if runs[a].out.result_at is not None]
        if violation.arm not in ended and all(
                runs[a].report().status in (ArmStatus.SUCCEEDED, ArmStatus.STOPPED) for a in ended):
            return False
        self._mark_done()
        self.watch.withdraw()
        self.withdrawn_violations.append(violation)
        return True

    def _first_controlled(self, failure: Failure) -> bool:
        """Record ``failure`` as the one stopped along the plan, if it is the run's first."""
        with self._lock:
            first = self._controlled_failure is None and not self.scope.canceled
            if first:
                self._controlled_failure = failure
        return first

    def _fail(self, failure: Failure) -> None:
        """A failure the watch found: the stop its reason calls for (``core/stop_policy.py``).
        A controlled stop records the failure (the report's first failure, status ``failed``)
        and stops every arm along the plan; where it cannot (no ramp within the limits, a stop
        already under way) and for every other reason, the scope fails: every arm canceled."""
        if controlled_stop_for(failure.reason):
            if not self._first_controlled(failure):
                return
            # the arm the watch found off the plan follows its reference, late: its stop goes
            # without the path tolerance replacements carry otherwise (it has passed it; its
            # controller would abort the stop, and every arm would be canceled)
            run = self.arms.get(failure.arm) if failure.arm is not None else None
            if run is not None:
                run.replacement_tolerances = None
            try:
                if self.parts.speed.stop(f"{failure.reason.value}: {failure.error_string}"):
                    return
            except RampLimitError:
                pass
        self.scope.fail(failure)

    def _peer_failed(self, failure: Failure) -> bool:
        """An arm's goal ended failed (its controller holds it; that arm's thread): its peers
        stop along the plan (the pre-flight gate's computed stop band certifies one arm holding
        while its peers ramp down). False where they cannot (not running yet, a stop already
        under way, no ramp within the limits): the scope fails, every arm is canceled."""
        speed = self.parts.speed
        if not self._first_controlled(failure) or not speed.controls(self.scope):
            return False
        try:
            return speed.stop(f"{failure.arm}: {failure.reason.value}: {failure.error_string}",
                              held=(failure.arm,))
        except RampLimitError:
            return False

    def _mark_done(self) -> None:
        """Arms whose result has been read are no longer judged; for a goal its controller
        ended failed, the figures of the states received while its result may have been
        waiting unread are taken back (the arm held against a plan that moved on)."""
        watch = self.watch
        for arm, run in self.arms.items():
            if run.out.result_at is not None and arm not in watch.done:
                watch.done.add(arm)
                if run.unread_since is not None:
                    watch.forget_since(arm, run.unread_since)

    def _on_tick(self) -> None:
        """Every ``WATCH_TICK_S`` while the run runs (the caller's thread)."""
        self._check_fresh()
        self.parts.speed.tick()

    def _check_fresh(self) -> None:
        """The watch's freshness check (no message reports that messages stopped), on this
        process's clock. Skipped right after this thread was itself starved of the CPU: then
        the joint states may be waiting unread, and an arm must not be blamed for it."""
        if self.scope.canceled:
            return
        tick = time.monotonic()
        late = self._last_fresh_tick is not None and \
            tick - self._last_fresh_tick > 0.5 * self.watch.stale_after
        self._last_fresh_tick = tick
        if late:
            return
        self._mark_done()
        violation = self.watch.check_fresh(self.parts.now())
        if violation is not None:
            self.scope.fail(Failure(violation.arm, FailureReason(violation.reason), None,
                                    violation.text, violation.evidence_at))

    # -- the end ----------------------------------------------------------------------------

    def _observe_stops(self) -> None:
        """After the last result, keep the joint states coming into the meter until every
        stopped arm has been still for ``STOP_SETTLE_S`` (at most ``STOP_OBSERVE_S`` of wall
        time): the report's measured stop then covers the arm's run-on past its result."""
        meter, monitor = self.meter, self.parts.monitor
        requests = stop_requests({a: r.out for a, r in self.arms.items()}, self.parts.speed.stops)
        if not requests or monitor.listener is None:
            return
        # every goal has ended: the watch has nothing left to judge; only the meter listens
        monitor.listener = lambda names, positions, stamp, received, velocities: \
            meter.on_joint_state(names, positions, stamp)
        deadline = time.monotonic() + STOP_OBSERVE_S
        while time.monotonic() < deadline and not all(
                meter.settled(a, at, STOP_SETTLE_S) for a, at in requests.items()):
            time.sleep(0.01)

    def _fresh_due(self) -> Optional[float]:
        """Seconds until the freshness check is due: when the first watched joint would go
        stale (a stream that stops is found then, not up to a tick later)."""
        due = self.watch.next_stale_in(self.parts.now())
        return None if due is None else due + FRESH_SLACK_S

    def _wait(self, threads: list[threading.Thread], deadline: Callable[[], float],
              tick: Callable[[], None] | None = None,
              due: Callable[[], Optional[float]] | None = None) -> None:
        """Wait (until the monotonic ``deadline()``) until every arm thread has finished, then
        join them. The wait is on a condition the arm threads signal, never an interrupted
        ``Thread.join`` (after a KeyboardInterrupt inside ``join``, CPython may report a running
        thread as finished: bpo-21822). A KeyboardInterrupt that still arrives (a caller's own
        SIGINT handler raising it) cancels every arm and the wait goes on. ``tick`` runs every
        ``WATCH_TICK_S`` meanwhile (the watch's freshness check, a deferred speed change), and
        sooner when ``due()`` (s) says the freshness check is due sooner."""
        finished = self._finished
        while True:
            try:  # the deadline moves when the speed changes: re-read it every step
                step = 1.0 if tick is None else WATCH_TICK_S
                soon = due() if due is not None else None
                if soon is not None:
                    step = min(step, max(soon, MIN_STEP_S))
                remaining = deadline() - time.monotonic()
                if finished.wait(max(0.0, min(remaining, step))) or remaining <= step:
                    break
                if tick is not None:
                    tick()
            except KeyboardInterrupt:
                self.scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT, None,
                                        "interrupted (Ctrl-C)"))
        if finished.done:  # every arm has returned: the joins are immediate
            for t in threads:
                t.join(1.0)


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


def join_budget(s: ExecutionSettings, duration: float) -> float:
    """Wall-clock bound for joining the arm threads: the sum of every bounded wait an arm makes
    (the result wait with its wall backstop) plus slack. A last line of defence only."""
    result_wait = WALL_BACKSTOP_FACTOR * (s.start_lead_s + duration * s.timeout_scaling
                                          + s.timeout_margin_s) + WALL_BACKSTOP_S
    return (gate_wait_s(s) + 2 * s.accept_wait_s + result_wait + CHECK_PERIOD_S
            + 2 * s.cancel_wait_s + JOIN_SLACK_S)
