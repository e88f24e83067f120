"""What an execution did: frozen values with a stable JSON form.

Every time is in seconds on one clock (the controllers' clock: ROS time, or sim time with
``use_sim_time``), so differences between fields are latencies:
``accepted_at - goal_sent_at`` is the acceptance latency, ``start_stamp - accepted_at`` the
margin left before the start, ``cancel_acknowledged_at - cancel_requested_at`` the cancel round
trip.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from mj_manipulator_ros.core.answer import Answer
from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.sync import Failure, FailureReason


class ArmStatus(str, enum.Enum):
    """How one arm's goal ended."""

    SUCCEEDED = "succeeded"
    ABORTED = "aborted"          # the controller aborted it (error_code says why)
    CANCELED = "canceled"        # canceled, and the final result confirmed it stopped
    REJECTED = "rejected"        # the controller rejected the goal: it never moved
    NOT_SENT = "not_sent"        # no goal was sent (another arm failed first, no server, ...)
    UNCONFIRMED_STOP = "UNCONFIRMED_STOP"  # the arm may still be moving: stop not confirmed
    STOPPED = "stopped"          # a controlled stop: at rest on the plan, confirmed


class ExecutionStatus(str, enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"  # stopped by abort() / Ctrl-C / the combined goal's cancel, all confirmed
    STOPPED = "stopped"    # a controlled stop (``stop``, or a pause not resumed): every arm at
    #                        rest on the plan at one plan time, confirmed


class StopKind(str, enum.Enum):
    """Which stop an arm got (IEC 60204-1 categories)."""

    CONTROLLED = "controlled"  # category 2: decelerated along the plan, on the shared plan time
    CANCEL = "cancel"          # the controller's cancel: it holds where the cancel finds it


@dataclass(frozen=True)
class StopRecord:
    """A controlled stop or pause of the running execution, computed from its ramp.

    Times on the controllers' clock (s); plan times in s; travel in rad (or m).

    Attributes:
        kind: GoalKind.STOP or GoalKind.PAUSE (``core/goal_kind.py``).
        reason: why it was asked for.
        requested_at: when it was asked for.
        stamp: the shared stamp the ramp starts at (the arms keep the plan until then).
        plan_time_requested, plan_time_stamp, plan_time_end: plan time at the request, at the
            stamp, and where every arm stands.
        ramp_s: the ramp's duration from the stamp.
        stop_time_s: from the request until every arm stands (stamp - request + ramp).
        travel: per arm, the largest joint travel from the request until it stands.
        binding: the (arm, joint, velocity|acceleration) that set the ramp.
        reaches_end: the plan's own end came before the ramp would have stopped it.
        computed_s: wall time spent computing the ramp (it comes out of the start lead).
        held: arms sent no stop (a failed arm its own controller holds): its peers stopped.
        goal_from: where the stop goals begin (the running goals' own path up to ``stamp``):
            a controller must take them after this on its clock to join them mid-way (taken
            before, it moves from its measured state to their first point, as
            joint_trajectory_controller does). Request minus the lead-in
            (``core/plan_speed.lead_in_s``).
        superseded_at: the plan time where a later change (a resume, a speed factor) took
            over before this ramp brought every arm to rest: none came to rest at
            ``plan_time_end``. None: the ramp ran to its end.
    """

    kind: GoalKind
    reason: str
    requested_at: float
    stamp: float
    plan_time_requested: float
    plan_time_stamp: float
    plan_time_end: float
    ramp_s: float
    stop_time_s: float
    travel: Mapping[str, float]
    binding: tuple
    reaches_end: bool = False
    computed_s: float = 0.0
    held: tuple = ()
    goal_from: float = 0.0
    superseded_at: Optional[float] = None

    def to_dict(self) -> dict:
        return {"kind": str(self.kind), "reason": self.reason, "requested_at": self.requested_at,
                "stamp": self.stamp, "plan_time_requested": self.plan_time_requested,
                "plan_time_stamp": self.plan_time_stamp, "plan_time_end": self.plan_time_end,
                "ramp_s": self.ramp_s, "stop_time_s": self.stop_time_s,
                "travel": dict(self.travel), "binding": list(self.binding),
                "reaches_end": self.reaches_end, "computed_s": self.computed_s,
                "goal_from": self.goal_from, "superseded_at": self.superseded_at,
                "held": list(self.held)}

    @classmethod
    def from_dict(cls, d: Mapping) -> "StopRecord":
        return cls(**{**d, "kind": GoalKind(d["kind"]), "binding": tuple(d["binding"]),
                      "held": tuple(d.get("held", ()))})


@dataclass(frozen=True)
class ArmReport:
    status: ArmStatus
    error_code: Optional[int] = None
    error_string: str = ""
    goal_sent_at: Optional[float] = None
    accepted_at: Optional[float] = None
    #: when the controller took the goal, by its own acceptance stamp (s, the controllers'
    #: clock); None when it gave none or gave one on another clock (``arm_client.taken_stamp``)
    taken_at: Optional[float] = None
    result_at: Optional[float] = None
    cancel_requested_at: Optional[float] = None
    cancel_acknowledged_at: Optional[float] = None
    stop_confirmed: bool = True
    max_tracking_error: Optional[float] = None  # rad (or m), from the joint states while running
    max_progress_skew: Optional[float] = None   # s, between this execution's arms
    max_velocity: Optional[float] = None        # per s: largest measured |joint velocity|
    stop: Optional[StopKind] = None             # which stop the arm got, if it was stopped
    #: the stop measured on the joint states (``core/stop_meter.py``): largest joint travel from
    #: the request (rad or m), until its last motion, until its last joint state recorded (s)
    stop_travel: Optional[float] = None
    stop_time_s: Optional[float] = None
    stop_observed_s: Optional[float] = None
    #: why a stopped arm's stop is not measured (its figures None): the joint-state stream they
    #: would come from was the failure (``core/execution_watch.STREAM_FAILURES``)
    stop_not_measured: Optional[str] = None

    def to_dict(self) -> dict:
        return {"status": self.status.value,
                "stop": None if self.stop is None else self.stop.value,
                "error_code": self.error_code,
                "error_string": self.error_string, "goal_sent_at": self.goal_sent_at,
                "accepted_at": self.accepted_at, "taken_at": self.taken_at,
                "result_at": self.result_at,
                "cancel_requested_at": self.cancel_requested_at,
                "cancel_acknowledged_at": self.cancel_acknowledged_at,
                "stop_confirmed": self.stop_confirmed,
                "max_tracking_error": self.max_tracking_error,
                "max_progress_skew": self.max_progress_skew,
                "max_velocity": self.max_velocity, "stop_travel": self.stop_travel,
                "stop_time_s": self.stop_time_s, "stop_observed_s": self.stop_observed_s,
                "stop_not_measured": self.stop_not_measured}

    @classmethod
    def from_dict(cls, d: Mapping) -> "ArmReport":
        stop = d.get("stop")
        return cls(**{**d, "status": ArmStatus(d["status"]),
                      "stop": None if stop is None else StopKind(stop)})


def not_checked_lines(entries: Sequence[str]) -> list[str]:
    """One line per configured pair a check skipped (``scene.allowed_collisions``): every report
    of a check or an execution that skipped one prints them (a configured pair is never silent)."""
    return [f"  NOT CHECKED (scene.allowed_collisions): {e}" for e in entries]


@dataclass(frozen=True)
class ExecutionReport:
    status: ExecutionStatus
    start_stamp: Optional[float]
    first_failure: Optional[Failure]
    arms: Mapping[str, ArmReport] = field(default_factory=dict)
    #: whether the pre-flight collision check certified the plan (None: not said)
    preflight_checked: Optional[bool] = None
    #: the bag of this run (None: not recorded) and, when writing it failed, why (the run went
    #: on; the bag holds what was written before the failure)
    record_path: Optional[str] = None
    record_error: Optional[str] = None
    #: the controlled stops and pauses of this run, in order (resumed pauses included)
    stops: tuple = ()
    #: the configuration's ``scene.allowed_collisions`` pairs the pre-flight check skipped,
    #: each ``"a x b (reason)"`` with what its entry stated explicitly (e.g. ``[BETWEEN ARMS]``)
    not_checked: tuple[str, ...] = ()
    #: the start stamp's lead, s (``execution.start_lead_s``; None: no stamp was made)
    start_lead_s: Optional[float] = None
    #: seconds spent in each phase of the execution (``core/execution_phase.py``), in the order
    #: entered: where the time from ``execute`` to the stamp went, and the run's own
    phase_times: Mapping[str, float] = field(default_factory=dict)
    #: speed changes that were deferred (asked before the latest stamp) and could not be
    #: applied when their time came, each with why: the request said yes, this says no
    speed_changes_dropped: tuple[str, ...] = ()
    #: every request made of this execution while it held the run (speed changes, stops,
    #: pauses, resumes), in order, each with its answer: applied, or why not
    #: (``core/answer.Answer``)
    requests: tuple = ()
    #: what the stop limits did to the plan (``check/stop_fit.StopFit.summary``): where
    #: it was slowed and by how much; '' when no limit is set (or the plan was checked by the
    #: caller: ``execute(checked=True)``)
    stop_limits: str = ""
    #: the black box's file of this execution (``ros/black_box.py``): written when it failed,
    #: stopped or was canceled after a goal was sent; None otherwise (or the black box is off)
    black_box_path: Optional[str] = None

    @property
    def succeeded(self) -> bool:
        return self.status is ExecutionStatus.SUCCEEDED

    @property
    def unconfirmed_arms(self) -> list[str]:
        return [a for a, r in self.arms.items() if r.status is ArmStatus.UNCONFIRMED_STOP]

    def to_dict(self) -> dict:
        return {"status": self.status.value, "start_stamp": self.start_stamp,
                "first_failure": None if self.first_failure is None else self.first_failure.to_dict(),
                "arms": {a: r.to_dict() for a, r in self.arms.items()},
                "preflight_checked": self.preflight_checked,
                "record_path": self.record_path, "record_error": self.record_error,
                "stops": [r.to_dict() for r in self.stops], "not_checked": list(self.not_checked),
                "start_lead_s": self.start_lead_s, "phase_times": dict(self.phase_times),
                "speed_changes_dropped": list(self.speed_changes_dropped),
                "requests": [a.to_dict() for a in self.requests],
                "stop_limits": self.stop_limits, "black_box_path": self.black_box_path}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Mapping) -> "ExecutionReport":
        ff = d.get("first_failure")
        failure = None if ff is None else Failure(
            ff["arm"], FailureReason(ff["reason"]), ff["error_code"], ff["error_string"],
            ff.get("evidence_at"))
        return cls(ExecutionStatus(d["status"]), d["start_stamp"], failure,
                   {a: ArmReport.from_dict(r) for a, r in d["arms"].items()},
                   d.get("preflight_checked"), d.get("record_path"), d.get("record_error"),
                   tuple(StopRecord.from_dict(r) for r in d.get("stops", ())),
                   tuple(d.get("not_checked", ())), d.get("start_lead_s"),
                   dict(d.get("phase_times", {})), tuple(d.get("speed_changes_dropped", ())),
                   tuple(Answer.from_dict(a) for a in d.get("requests", ())),
                   d.get("stop_limits", ""), d.get("black_box_path"))

    def summary(self) -> str:
        """A few human lines: status, first failure, and each arm."""
        lines = [f"execution {self.status.value}"
                 + (f" (start stamp {self.start_stamp:.3f} s)" if self.start_stamp else "")]
        if self.preflight_checked is False:
            lines.append("  WARNING: pre-flight collision check OFF (execution.preflight_check: "
                         "false): this plan was not replayed for collisions")
        lines.extend(not_checked_lines(self.not_checked))
        if self.stop_limits:
            lines.append(f"  stop limits: {self.stop_limits}")
        lines.extend(f"  {text}" for text in self.speed_changes_dropped)
        lines.extend(f"  {a.text()}" for a in self.requests if not a.applied)
        if self.first_failure:
            f = self.first_failure
            lines.append(f"  first failure: {f.arm or 'external'}: {f.reason.value}"
                         + (f" (error_code {f.error_code})" if f.error_code is not None else "")
                         + (f": {f.error_string}" if f.error_string else ""))
        for r in self.stops:
            travel = ", ".join(f"{a} {t:.4f}" for a, t in r.travel.items())
            who = (f"every arm but {', '.join(r.held)} (held by its controller)" if r.held
                   else "every arm")
            rest = (f"{who} at rest at plan time {r.plan_time_end:.3f} s, {r.stop_time_s:.3f} s "
                    "after the request" if r.superseded_at is None else
                    f"superseded at plan time {r.superseded_at:.3f} s by the next change, before "
                    f"{who} came to rest (its ramp would have ended at plan time "
                    f"{r.plan_time_end:.3f} s)")
            lines.append(f"  {r.kind} ({r.reason}): at plan time {r.plan_time_requested:.3f} s, "
                         f"{rest} (ramp {r.ramp_s:.3f} s, set by {r.binding[1] or 'nothing'} "
                         f"{r.binding[2]}); largest joint travel {travel}"
                         + (" (the plan's own end came first)" if r.reaches_end else ""))
        if self.phase_times:
            lines.append("  phases: " + ", ".join(f"{p} {t:.3f} s"
                                                  for p, t in self.phase_times.items()))
        if self.black_box_path is not None:
            lines.append(f"  black box: {self.black_box_path}")
        if self.record_error is not None:
            lines.append(f"  RECORD FAILED: {self.record_error} (the run went on; {self.record_path} "
                         "holds what was written before the failure)")
        for arm, r in self.arms.items():
            extra = "" if r.stop_confirmed else "  <-- STOP NOT CONFIRMED: the arm may be moving"
            watched = ""
            if r.max_tracking_error is not None:
                watched = f" (max tracking error {r.max_tracking_error:.4f}"
                watched += ("" if r.max_progress_skew is None else
                            f", max progress skew {r.max_progress_skew * 1e3:.1f} ms")
                watched += ("" if r.max_velocity is None else
                            f", max velocity {r.max_velocity:.3f}/s") + ")"
            elif self.start_stamp is not None and r.goal_sent_at is not None:
                watched = " (NOT WATCHED: no joint state of every joint arrived while it ran)"
            measured = _measured_stop(r)
            read_late = ""
            if (self.start_stamp is not None and r.accepted_at is not None
                    and r.taken_at is not None and r.taken_at <= self.start_stamp < r.accepted_at):
                read_late = (f" (its acceptance read here {(r.accepted_at - self.start_stamp) * 1e3:.1f}"
                             f" ms after the start stamp, this process busy; taken by the controller"
                             f" {(self.start_stamp - r.taken_at) * 1e3:.1f} ms before it, on its "
                             "clock: it started in time)")
            lines.append(f"  {arm}: {r.status.value}"
                         + (f" ({r.stop.value} stop{measured})" if r.stop is not None else
                            f" (held by its controller{measured})" if measured else "")
                         + (f" error_code={r.error_code}" if r.error_code else "")
                         + (f" {r.error_string}" if r.error_string else "") + watched + read_late
                         + extra)
        return "\n".join(lines)


def _measured_stop(r: ArmReport) -> str:
    """The arm's measured stop for the summary: its figures, or why there are none."""
    if r.stop_not_measured is not None:
        return f": not measured: {r.stop_not_measured}"
    if r.stop_travel is None:
        return ""
    return (f": travel {r.stop_travel:.4f} in {r.stop_time_s:.3f} s, measured over "
            f"{r.stop_observed_s:.3f} s")
