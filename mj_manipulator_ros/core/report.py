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
from typing import Mapping, Optional

from mj_manipulator_ros.core.sync import Failure, FailureReason


class ArmStatus(str, enum.Enum):
    """How one arm's goal ended."""

    SUCCEEDED = "succeeded"
    ABORTED = "aborted"          # the controller aborted it (error_code says why)
    CANCELED = "canceled"        # canceled, and the final result confirmed it stopped
    REJECTED = "rejected"        # the controller rejected the goal: it never moved
    NOT_SENT = "not_sent"        # no goal was sent (another arm failed first, no server, ...)
    UNCONFIRMED_STOP = "UNCONFIRMED_STOP"  # the arm may still be moving: stop not confirmed


class ExecutionStatus(str, enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"  # stopped by abort() / Ctrl-C / the combined goal's cancel, all confirmed


@dataclass(frozen=True)
class ArmReport:
    status: ArmStatus
    error_code: Optional[int] = None
    error_string: str = ""
    goal_sent_at: Optional[float] = None
    accepted_at: Optional[float] = None
    result_at: Optional[float] = None
    cancel_requested_at: Optional[float] = None
    cancel_acknowledged_at: Optional[float] = None
    stop_confirmed: bool = True
    max_tracking_error: Optional[float] = None  # rad (or m), from the joint states while running
    max_progress_skew: Optional[float] = None   # s, between this execution's arms
    max_velocity: Optional[float] = None        # per s: largest measured |joint velocity|

    def to_dict(self) -> dict:
        return {"status": self.status.value, "error_code": self.error_code,
                "error_string": self.error_string, "goal_sent_at": self.goal_sent_at,
                "accepted_at": self.accepted_at, "result_at": self.result_at,
                "cancel_requested_at": self.cancel_requested_at,
                "cancel_acknowledged_at": self.cancel_acknowledged_at,
                "stop_confirmed": self.stop_confirmed,
                "max_tracking_error": self.max_tracking_error,
                "max_progress_skew": self.max_progress_skew,
                "max_velocity": self.max_velocity}

    @classmethod
    def from_dict(cls, d: Mapping) -> "ArmReport":
        return cls(**{**d, "status": ArmStatus(d["status"])})


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
                "record_path": self.record_path, "record_error": self.record_error}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Mapping) -> "ExecutionReport":
        ff = d.get("first_failure")
        failure = None if ff is None else Failure(
            ff["arm"], FailureReason(ff["reason"]), ff["error_code"], ff["error_string"])
        return cls(ExecutionStatus(d["status"]), d["start_stamp"], failure,
                   {a: ArmReport.from_dict(r) for a, r in d["arms"].items()},
                   d.get("preflight_checked"), d.get("record_path"), d.get("record_error"))

    def summary(self) -> str:
        """A few human lines: status, first failure, and each arm."""
        lines = [f"execution {self.status.value}"
                 + (f" (start stamp {self.start_stamp:.3f} s)" if self.start_stamp else "")]
        if self.preflight_checked is False:
            lines.append("  WARNING: pre-flight collision check OFF (execution.preflight_check: "
                         "false): this plan was not replayed for collisions")
        if self.first_failure:
            f = self.first_failure
            lines.append(f"  first failure: {f.arm or 'external'}: {f.reason.value}"
                         + (f" (error_code {f.error_code})" if f.error_code is not None else "")
                         + (f": {f.error_string}" if f.error_string else ""))
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
            lines.append(f"  {arm}: {r.status.value}"
                         + (f" error_code={r.error_code}" if r.error_code else "")
                         + (f" {r.error_string}" if r.error_string else "") + watched + extra)
        return "\n".join(lines)
