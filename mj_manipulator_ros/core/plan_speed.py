"""The running execution's speed: speed changes, the controlled stop, pause and resume.

Every change is one shared time scaling of the plan (``core/time_scaling.py``) that starts at
one new shared time (now + start lead), sent to every arm as a goal that preempts its running
one, as a joint_trajectory_controller takes any new goal (goal replacement only: it works
against an unmodified controller). Each goal begins slightly *before* it is sent, with the
running goal itself up to the ramp: the controller joins it mid-way and its reference stays
continuous (no move from the measured state, no command step at the switch). The plan clock the watch reads (:class:`PlanClock`) follows the same
scaling, so the watch checks a stopping, paused or resuming arm against where the plan says
it is.

- :meth:`PlanSpeed.set_speed`: ramp from the current speed to a new factor.
- :meth:`PlanSpeed.stop`: a controlled stop (IEC 60204-1 category 2): ramp to 0; each arm's
  goal ends at rest at one plan time and the execution ends ``stopped``.
- :meth:`PlanSpeed.pause` / :meth:`PlanSpeed.resume`: ramp to 0 and wait, the arms holding
  their last point (no goal active); then, after re-checking what can have changed while
  paused (each arm where it was paused, the controllers' clocks), ramp back up from a new stamp.

One change at a time; a speed change asked while the previous change has not reached its
stamp is kept and applied once it has (the latest wins), as before: a stop, pause or resume is
never deferred.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Optional

import numpy as np

from mj_manipulator_ros.core.answer import Answer, Refusal
from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import MjManipulatorError, RampLimitError
from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.joint_path import joint_travel
from mj_manipulator_ros.core.execution_phase import MotionPhase, motion_transition
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.report import StopRecord
from mj_manipulator_ros.core.sync import StartStamp
from mj_manipulator_ros.core.time_scaling import (
    JointBounds, Ramp, RunningGoal, config_bounds, plan_ramp)

#: a change's goals begin this long before it is asked for, beyond the larger of the clock
#: offset the start check allows and the controllers' clock lag measured now (``lead_in_s``):
#: every controller picks them up after their first point and joins them mid-way, on the
#: running goal's own spline (``core/time_scaling.ramp_trajectory``)
LEAD_IN_MARGIN_S = 0.03
#: computations of a change's ramp before it is sent anyway (see PlanSpeed._prepare)
PREPARE_TRIES = 3


class PlanSpeed:
    """Args:
        config: arms (limits) and execution settings (start lead, stop acceleration).
        now_ns: the controllers' clock, integer ns.
        check_resume: ``(pose_plan) -> None``, the one-sample plan of every arm at the pose it
            rests on; raises when an arm may not resume (not at that pose, a controller clock
            off): the executor's start checks.
        clock_lag_s: ``() -> s``, how far the slowest controller's clock is behind ``now_ns``
            now; none: 0. A change's ramp starts one start lead after the controllers' own now
            (``now_ns`` less this), and its goals begin :func:`lead_in_s` before.
    """

    def __init__(self, config: ExecutorConfig, now_ns: Callable[[], int],
                 check_resume: Callable[[MultiArmPlan], None],
                 clock_lag_s: Optional[Callable[[], float]] = None) -> None:
        self.config = config
        self._now_ns = now_ns
        self._clock_lag_s = clock_lag_s or (lambda: 0.0)
        self._check_resume = check_resume
        self._lock = threading.RLock()
        self._running: Optional[tuple] = None     # (plan, runs, clock, scope)
        self._bounds: dict[str, JointBounds] = {}
        self._goals: dict[str, RunningGoal] = {}  # what each controller runs
        self._stamp: Optional[float] = None       # the latest stamp sent (start or change)
        self._start_s: Optional[float] = None     # the plan's start stamp (s)
        self._start_ns = 0                        # the same, ns
        self._deferred: Optional[float] = None
        self._factor = 1.0                        # the speed asked for (resume returns to it)
        self._goal_from = 0.0                     # where the latest change's goals begin (s)
        self._phase = MotionPhase.IDLE            # core/execution_phase.py: its transitions
        self.stops: list[StopRecord] = []
        #: speed changes answered "deferred" (asked before the latest stamp) that could not be
        #: applied when their time came, each with why (the run's, reset at its start)
        self.dropped: list[str] = []
        #: every answer given to a request of the execution in progress, in order (reset by
        #: :meth:`new_execution`; the executor adds its own: a pause held before the start)
        self.answers: list[Answer] = []
        self._paused_at: Optional[float] = None   # monotonic
        self._paused_total = 0.0
        self.ramp_total_s = 0.0
        #: called with the request time (controllers' clock, s) of each controlled stop, as it
        #: is asked for (before its ramp is computed)
        self.on_stop: Callable[[float], None] = lambda at: None

    @property
    def state(self) -> MotionPhase:
        """The motion's phase (``core/execution_phase.py``, its second table)."""
        return self._phase

    def new_execution(self) -> None:
        """An execution takes the run: the answers from here on are its."""
        with self._lock:
            self.answers = []

    def record(self, answer: Answer) -> Answer:
        """Keep ``answer`` among the execution's (any thread); returns it."""
        with self._lock:
            self.answers.append(answer)
        return answer

    def _enter(self, phase: MotionPhase, cause: str) -> None:
        """Move to ``phase`` by the table (the lock held); an illegal one raises."""
        self._phase = motion_transition(self._phase, phase, cause)

    # ---- the executor's bookkeeping -----------------------------------------------------------
    def begin(self, plan: MultiArmPlan, runs, clock, scope, stamp_s: float) -> None:
        bounds = config_bounds(plan, self.config)
        with self._lock:
            self._running = (plan, runs, clock, scope)
            self._bounds = bounds
            self._goals = {a: RunningGoal(plan[a], stamp_s) for a in plan.arm_names}
            self._stamp, self._deferred, self._factor = stamp_s, None, 1.0
            #: the plan's start stamp (s, and ns as the gate made it)
            self._start_s, self._start_ns = stamp_s, int(round(stamp_s * 1e9))
            self._enter(MotionPhase.RUNNING, "the start stamp")
            self.stops = []
            self.dropped = []
            self._paused_at, self._paused_total, self.ramp_total_s = None, 0.0, 0.0

    def end(self) -> None:
        with self._lock:
            self._running = None
            if self._phase is not MotionPhase.IDLE:   # (never begun: nothing to end)
                self._enter(MotionPhase.IDLE, "execution ended")
            if self._paused_at is not None:
                self._paused_total += time.monotonic() - self._paused_at
                self._paused_at = None

    def controls(self, scope) -> bool:
        """Is ``scope``'s execution the running one (stamped, so a controlled stop applies)?"""
        with self._lock:
            return self._running is not None and self._running[3] is scope

    def paused_wall_s(self) -> float:
        """Wall time spent paused so far (s): the execution's join bound excludes it."""
        with self._lock:
            current = 0.0 if self._paused_at is None else time.monotonic() - self._paused_at
            return self._paused_total + current

    def _now(self) -> float:
        return self._now_ns() * 1e-9

    # ---- changes (any thread) -----------------------------------------------------------------
    def set_speed(self, factor: float) -> Answer:
        """Ramp to ``factor`` (already checked by the caller) from a new stamp; while paused,
        resume at it. Refused when nothing runs, a stop is under way or the plan ends first.
        (Every answer, and every error raised, is kept in :attr:`answers`.)"""
        return self._answer(f"speed {factor:g}", lambda: self._set_speed(factor))

    def stop(self, reason: str, held: tuple[str, ...] = ()) -> Answer:
        """A controlled stop: every arm decelerates along the plan on one plan time and ends at
        rest; the execution ends ``stopped``. While paused: the execution ends there. Refused
        when nothing runs, a stop is already under way, or the plan ends first. Arms in
        ``held`` (a failed arm whose controller holds it) are sent nothing.

        Raises:
            RampLimitError: no stop within the limits from here (the caller cancels instead).
        """
        return self._answer("stop", lambda: self._stop(reason, held))

    def pause(self, reason: str = "pause") -> Answer:
        """Ramp to rest along the plan and hold there until :meth:`resume` (or ``max_pause_s``).
        Refused when nothing runs, it is already paused or stopping, or the plan ends first.

        Raises:
            RampLimitError: no stop within the limits from here.
        """
        return self._answer("pause", lambda: self._pause(reason))

    def resume(self, factor: Optional[float] = None) -> Answer:
        """Continue a paused execution at ``factor`` (default: the speed before the pause) from
        a new stamp, ramping up along the plan. Refused when not paused.

        Raises:
            StartStateError, ClockOffsetError: an arm is not where it was paused, or a
                controller's clock is off (nothing was sent: still paused).
            RampLimitError: no ramp within the limits.
        """
        request = "resume" if factor is None else f"resume at speed {factor:g}"
        return self._answer(request, lambda: self._resume(factor, request))

    def _answer(self, request: str, act: Callable[[], Answer]) -> Answer:
        """``act()``'s answer, kept; an error it raises is kept as the refusal it is, then
        raised."""
        try:
            answer = act()
        except RampLimitError as exc:
            self.record(Answer.no(request, Refusal.NO_RAMP, str(exc), self._now()))
            raise
        except MjManipulatorError as exc:
            self.record(Answer.no(request, Refusal.CHECK_FAILED, f"{type(exc).__name__}: {exc}",
                                  self._now()))
            raise
        return self.record(answer)

    def _set_speed(self, factor: float) -> Answer:
        request = f"speed {factor:g}"
        with self._lock:
            if self._running is None or self._phase is MotionPhase.STOPPING:
                return self._refused(request)
            if self._phase is MotionPhase.PAUSED:
                return self._resume(factor, f"{request} (paused: resume at it)")
            if self._stamp is not None and self._now() < self._stamp:
                self._deferred = factor      # applied at the tick after that stamp
                return Answer.yes(request, "deferred: applied once the previous change (or the "
                                  "start) reaches its stamp; the latest asked wins", self._now())
            self._deferred = None
            return self._change(factor, request)

    def tick(self) -> None:
        """A speed change kept while the previous change was in flight, once it has started."""
        with self._lock:
            factor = self._deferred
            if factor is None or self._running is None or self._phase is not MotionPhase.RUNNING or \
                    self._stamp is None or self._now() < self._stamp:
                return
            self._deferred = None
            request = f"speed {factor:g} (asked before the stamp, deferred)"
            try:
                answer = self._change(factor, request)
            except RampLimitError as exc:   # the caller heard "deferred": said here, not raised
                self.dropped.append(f"{request} not applied: {exc}")
                return
            if not answer:
                self.dropped.append(f"{request} not applied: {answer.why}")

    def _stop(self, reason: str, held: tuple[str, ...]) -> Answer:
        with self._lock:
            if self._running is None or self._phase is MotionPhase.STOPPING:
                return self._refused("stop")
            if self._phase is MotionPhase.PAUSED:
                self._enter(MotionPhase.STOPPING, f"stop while paused ({reason})")
                for run in self._running[1].values():
                    run.request_end()
                return Answer.yes("stop", "paused: the execution ends at rest where it is",
                                  self._now())
            return self._ramp_to_rest(GoalKind.STOP, reason, held)

    def _pause(self, reason: str) -> Answer:
        with self._lock:
            if self._running is None or self._phase is not MotionPhase.RUNNING:
                return self._refused("pause")
            return self._ramp_to_rest(GoalKind.PAUSE, reason)

    def _resume(self, factor: Optional[float], request: str) -> Answer:
        with self._lock:
            if self._running is None or self._phase is not MotionPhase.PAUSED:
                return self._refused(request)
            plan, runs, clock, _scope = self._running
            if all(r.paused for r in runs.values()):   # at rest: re-check what can have changed
                rest = self.stops[-1].plan_time_end
                self._check_resume(_pose_plan(plan, rest))
            f = self._factor if factor is None else float(factor)
            _now_ns, stamp, _s0, ramp = self._prepare(f)
            self._send(ramp, stamp, GoalKind.RESUME)
            self._factor = f
            self._enter(MotionPhase.RUNNING, "resume")
            if self._paused_at is not None:
                self._paused_total += time.monotonic() - self._paused_at
                self._paused_at = None
            return Answer.yes(request, f"ramping up from the stamp {stamp.seconds:.3f} s",
                              self._now())

    # ---- internals (the lock held) ------------------------------------------------------------
    def _refused(self, request: str) -> Answer:
        """The answer to ``request`` that does not apply in the motion's phase now."""
        now = self._now()
        if self._running is None:
            return Answer.no(request, Refusal.NOTHING_RUNNING,
                             "no stamped motion (before its start, or after its end)", now)
        if self._phase is MotionPhase.STOPPING:
            return Answer.no(request, Refusal.STOPPING, "a controlled stop is under way", now)
        if self._phase is MotionPhase.PAUSED:
            return Answer.no(request, Refusal.PAUSED, "paused already", now)
        return Answer.no(request, Refusal.NOT_PAUSED, f"the motion is {self._phase.value}", now)

    def _too_late(self, request: str, scope, s0: float) -> Answer:
        now = self._now()
        if scope.canceled:
            return Answer.no(request, Refusal.CANCELED, "the execution is being canceled", now)
        return Answer.no(request, Refusal.PLAN_ENDS_FIRST,
                         f"the plan ({self._running[0].duration:.3f} s) is over before the "
                         f"change would act (plan time {s0:.3f} s at its stamp)", now)

    def _change(self, factor: float, request: str) -> Answer:
        plan, _runs, _clock, scope = self._running
        _now_ns, stamp, s0, ramp = self._prepare(factor)
        if scope.canceled or ramp is None or s0 >= plan.duration - 1e-3 or ramp.reaches_end:
            return self._too_late(request, scope, s0)   # over before the new speed is reached
        self._send(ramp, stamp, GoalKind.SPEED)
        self._factor = factor
        return Answer.yes(request, f"ramping from the stamp {stamp.seconds:.3f} s", self._now())

    def _ramp_to_rest(self, kind: GoalKind, reason: str, held: tuple[str, ...] = ()) -> Answer:
        plan, _runs, clock, scope = self._running
        requested = self._now()
        if kind is GoalKind.STOP:
            self.on_stop(requested)   # before the ramp is computed: the arms move meanwhile
        s_req = clock.plan_time(requested)
        started = time.monotonic()
        _now_ns, stamp, s0, ramp = self._prepare(0.0)
        if scope.canceled or ramp is None:
            return self._too_late(kind.value, scope, s0)
        if not ramp.reaches_end:
            self._send(ramp, stamp, kind, held)
        travel = _travel(plan, max(s_req, 0.0), ramp.end_plan_time)
        self.stops.append(StopRecord(
            kind, reason, requested, stamp.seconds, s_req, s0, ramp.end_plan_time,
            ramp.duration, stamp.seconds + ramp.duration - requested,
            {a: v for a, v in travel.items() if a not in held}, ramp.binding,
            ramp.reaches_end, time.monotonic() - started, tuple(held), self._goal_from))
        paused = kind is GoalKind.PAUSE and not ramp.reaches_end
        self._enter(MotionPhase.PAUSED if paused else MotionPhase.STOPPING, f"{kind} ({reason})")
        if paused:
            self._paused_at = time.monotonic()
        return Answer.yes(kind.value, f"ramping to rest from the stamp {stamp.seconds:.3f} s, at "
                          f"rest at plan time {ramp.end_plan_time:.3f} s"
                          + (" (the plan's end: the execution ends there)"
                             if kind is GoalKind.PAUSE and not paused else ""), requested)

    def _prepare(self, f1: float):
        """The ramp to ``f1`` from a new stamp: (now ns, stamp, plan time there, ramp or None
        when the plan ends first). A stop asked before the plan's start, with half the start
        lead or more left and no change sent yet, starts at the plan's start (a hold there:
        ``core/time_scaling.plan_ramp``). The stamp leaves the controllers time to pick the goals up
        (start lead) only if computing took little of it: past half the lead, computed again
        from a fresh stamp one lead plus twice the last computing's time ahead (a machine
        that slow computes as slowly again; at most PREPARE_TRIES times; then sent anyway: a
        controller that takes a goal after its ramp began joins it there, continuous in
        position)."""
        plan, _runs, clock, _scope = self._running
        half_lead = int(self.config.execution.start_lead_s * 0.5e9)
        extra_s = 0.0
        for _ in range(PREPARE_TRIES):
            now_ns, lag_s, stamp = self._ramp_stamp(extra_s)
            start = self._start_ns
            if f1 == 0.0 and self._stamp == self._start_s and start < stamp.nanoseconds and \
                    now_ns - int(round(lag_s * 1e9)) <= start - half_lead:
                # asked in the start lead with half of it left: the stop starts where the plan
                # does (a hold there: nothing has moved), and the controllers still get the
                # time the ramps' own rule below gives them to take it
                stamp = StartStamp(start)
            s0 = clock.plan_time(stamp.seconds)
            if s0 >= plan.duration - 1e-9:
                return now_ns, stamp, s0, None
            ramp = self._plan(plan, s0, clock.rate(stamp.seconds), f1, now_ns, lag_s, stamp)
            done_ns = self._now_ns()
            if done_ns - int(round(lag_s * 1e9)) <= stamp.nanoseconds - half_lead:
                break
            extra_s = 2.0 * max(0.0, (done_ns - now_ns) * 1e-9)
        return now_ns, stamp, s0, ramp

    def _ramp_stamp(self, extra_s: float = 0.0) -> tuple[int, float, StartStamp]:
        """Now (ns), the controllers' clock lag (s) and where a change asked now starts: one
        start lead after the controllers' own now. On the executor's now, a controller whose
        clock lags would run the plan on for the lag as well before the ramp (a starved
        in-process simulator 354 ms behind: its arm came to rest 0.90 s of plan time past its
        peer's abort, the pre-flight gate's band being 0.90 s; CI saw 1.10 s). The controllers
        still get the whole lead, on their clock, to take the goals. ``extra_s``: more lead
        (s) after a computing that took most of it."""
        now_ns, lag_s = self._now_ns(), float(self._clock_lag_s())
        return now_ns, lag_s, StartStamp.after(now_ns - int(round(lag_s * 1e9)),
                                               self.config.execution.start_lead_s + extra_s)

    def _plan(self, plan: MultiArmPlan, s0: float, f0: float, f1: float, now_ns: int,
              lag_s: float, stamp: StartStamp) -> Ramp:
        back = lead_in_s(self.config.execution.max_clock_offset_s, lag_s)
        self._goal_from = now_ns * 1e-9 - back
        return plan_ramp(plan, max(s0, 0.0), f0, f1, self._bounds, running=self._goals,
                         t_from=self._goal_from, t_ramp=stamp.seconds)

    def _send(self, ramp: Ramp, stamp: StartStamp, kind: GoalKind, held: tuple[str, ...] = ()) -> None:
        """Every arm's goal but ``held``'s, stamped ``lead_s`` before the ramp's start
        ``stamp``."""
        plan, runs, clock, _scope = self._running
        if not kind.ramps_to_rest:
            self._supersede(plan, stamp.seconds, ramp.start_plan_time)
        clock.rescale(stamp.seconds, ramp.start_plan_time, ramp.scaling)
        self._stamp = stamp.seconds
        self.ramp_total_s += ramp.duration
        goal_stamp = StartStamp(stamp.nanoseconds - int(round(ramp.lead_s * 1e9)))
        for arm, run in runs.items():
            if arm in held:
                continue
            self._goals[arm] = RunningGoal(ramp.trajectories[arm], goal_stamp.seconds)
            run.request_retime(ramp.trajectories[arm], goal_stamp, kind, stamp.seconds)

    def _supersede(self, plan: MultiArmPlan, stamp_s: float, s_from: float) -> None:
        """A change whose ramp starts (``stamp_s``, plan time ``s_from``) before the last stop
        or pause ramp ended takes over from it: that record says so, its travel up to there
        (no arm came to rest where it said)."""
        if not self.stops:
            return
        last = self.stops[-1]
        if last.superseded_at is not None or last.reaches_end or \
                stamp_s >= last.stamp + last.ramp_s - 1e-9:
            return
        travel = _travel(plan, max(last.plan_time_requested, 0.0), s_from)
        self.stops[-1] = dataclasses.replace(
            last, superseded_at=s_from,
            travel={a: v for a, v in travel.items() if a in last.travel})


def lead_in_s(max_clock_offset_s: float, clock_lag_s: float) -> float:
    """How long (s) before a change is asked for its goals begin (on the running goals' own
    path): the larger of the clock offset the start check allows and the controllers' lag
    measured now, plus LEAD_IN_MARGIN_S. A controller whose clock is behind by more than this
    (less the goal's transport time) takes the goal before its first point and, as
    joint_trajectory_controller does, moves from its *measured* state to that point in what is
    left: its tracking error becomes a step (a starved simulator 50 ms behind, a full-speed
    stop: 4.6 x the velocity limit for 3 cycles). A longer lead-in costs nothing but points:
    the goal's first part is the running goal itself."""
    return max(max_clock_offset_s, clock_lag_s) + LEAD_IN_MARGIN_S


def _travel(plan: MultiArmPlan, s_from: float, s_to: float) -> dict[str, float]:
    """Per arm, the largest joint path length between two plan times (sampled every ms)."""
    out = {}
    ts = np.linspace(s_from, s_to, max(2, int((s_to - s_from) / 1e-3) + 1))
    for arm, traj in plan.arms.items():
        p, _, _ = sample(traj, ts)
        out[arm] = joint_travel(p)
    return out


def _pose_plan(plan: MultiArmPlan, s: float) -> MultiArmPlan:
    """A one-point plan at the plan's pose at plan time ``s`` (for the resume check)."""
    arms = {}
    for arm, traj in plan.arms.items():
        p, _, _ = sample(traj, [s])
        arms[arm] = ArmTrajectory(traj.joint_names, [0.0], p, arm=arm)
    return MultiArmPlan(arms)
