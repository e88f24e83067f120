"""What a request to the running execution was answered: applied, or why not.

Every request another thread makes of an execution (a speed change, a controlled stop, a
pause, a resume) gets one :class:`Answer` from ``core/plan_speed.PlanSpeed`` and the executor:
applied, or refused with a :class:`Refusal` naming why. An answer is truthy when applied, so
``if speed.pause(...):`` reads as it did when the answer was a bool.

Where answers go: ``MultiArmExecutor``'s public methods keep returning a bool (their API); the
answer itself is the calling thread's ``MultiArmExecutor.last_answer()`` (the execution node
puts its words in each service's response and log), and every answer given while an execution
ran is in its report (``ExecutionReport.requests``). No request is lost: each is applied, or
answered with why not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from mj_manipulator_ros.core.phase_table import WordEnum


class Refusal(WordEnum):
    """Why a request was not applied."""

    NOTHING_RUNNING = "nothing_running"    # no stamped motion: before the start, after the end
    STOPPING = "stopping"                  # a controlled stop is already under way
    PAUSED = "paused"                      # paused already (a pause asked again)
    NOT_PAUSED = "not_paused"              # a resume while the motion runs (or stops)
    PLAN_ENDS_FIRST = "plan_ends_first"    # the plan is over before the change would act
    CANCELED = "canceled"                  # the execution is being canceled: nothing more is sent
    NO_RAMP = "no_ramp"                    # no ramp within the joints' limits (raised as well)
    CHECK_FAILED = "check_failed"          # a resume's re-check failed (raised as well)
    HELD = "held"                          # a pause while one holds before the start already


@dataclass(frozen=True)
class Answer:
    """One request's answer.

    Attributes:
        request: what was asked, as words ("pause", "speed 0.5", "stop", "resume").
        applied: it was (or, for a speed change asked before the latest stamp, will be) acted on.
        refusal: why not (None when applied).
        why: the answer in words, for a log or a service response.
        at: when it was answered (s, the controllers' clock; NaN when not known).
    """

    request: str
    applied: bool
    refusal: Optional[Refusal] = None
    why: str = ""
    at: float = float("nan")

    def __bool__(self) -> bool:
        return self.applied

    @classmethod
    def yes(cls, request: str, why: str = "applied", at: float = float("nan")) -> "Answer":
        return cls(request, True, None, why, at)

    @classmethod
    def no(cls, request: str, refusal: Refusal, why: str, at: float = float("nan")) -> "Answer":
        return cls(request, False, refusal, why, at)

    def text(self) -> str:
        """"pause: applied" / "resume: refused (not_paused: the motion is running)"."""
        if self.applied:
            return f"{self.request}: {self.why}"
        return f"{self.request}: refused ({self.refusal.value}: {self.why})"

    def to_dict(self) -> dict:
        return {"request": self.request, "applied": self.applied,
                "refusal": None if self.refusal is None else self.refusal.value,
                "why": self.why, "at": None if math.isnan(self.at) else self.at}

    @classmethod
    def from_dict(cls, d) -> "Answer":
        refusal = d.get("refusal")
        return cls(d["request"], bool(d["applied"]), None if refusal is None else Refusal(refusal),
                   d.get("why", ""), float("nan") if d.get("at") is None else float(d["at"]))
