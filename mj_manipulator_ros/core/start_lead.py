"""The start lead an execution uses: the configured one, raised by what the machine measures now.

Every arm's goal must be accepted before the shared start stamp (``late_acceptance`` otherwise:
the arms would not start together). Idle, acceptance takes milliseconds and the configured
``start_lead_s`` (0.25 s) leaves a wide margin. On a loaded machine the controllers' processes
and this one are scheduled late, by as much as their joint-state streams show: a message that
reaches the executor later than the fastest message of the last window (its *delivery jitter*)
was delayed by exactly the scheduling and transport a goal and its acceptance also cross, one
way each. So the lead is raised by twice the worst delivery jitter of any arm's joint states
over the last window, and never above ``max_start_lead_s``.

What it does not hide: a controller slow to *accept* (its joint states on time) gets no longer
lead, so it still fails by name (``late_acceptance``); the lead stops growing at
``max_start_lead_s``. The stop ramps' lead (``start_lead_s``) is unchanged: it is part of the
stop band the pre-flight gate certifies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

#: the lead is raised by this many times the worst delivery jitter (a goal there, its
#: acceptance back)
JITTER_FACTOR = 2.0


@dataclass(frozen=True)
class StartLead:
    """The lead used for one execution's start stamp.

    Attributes:
        seconds: the lead, s (on the controllers' clock).
        configured: ``execution.start_lead_s``, s.
        why: one line: the configured lead, or what raised it (arm, jitter) and any cap.
    """

    seconds: float
    configured: float
    why: str

    @property
    def raised(self) -> bool:
        return self.seconds > self.configured

    def to_dict(self) -> dict:
        return {"seconds": self.seconds, "configured": self.configured, "why": self.why}


def start_lead(configured_s: float, max_s: float,
               jitter_s: Mapping[str, Optional[float]]) -> StartLead:
    """The lead from the configured one and each arm's current delivery jitter (s; None where
    the arm has no joint states in the window, which raises nothing).

    ``max_s`` below ``configured_s`` leaves the configured lead as it is (it is never lowered).
    """
    measured = {a: j for a, j in jitter_s.items() if j is not None and j > 0}
    if not measured:
        return StartLead(configured_s, configured_s, f"configured {configured_s:.3f} s")
    arm, worst = max(measured.items(), key=lambda kv: kv[1])
    raised = configured_s + JITTER_FACTOR * worst
    cap = max(max_s, configured_s)
    seconds = min(raised, cap)
    if seconds <= configured_s:
        return StartLead(configured_s, configured_s, f"configured {configured_s:.3f} s")
    why = (f"configured {configured_s:.3f} s + {JITTER_FACTOR:g} x {worst * 1e3:.1f} ms: arm "
           f"{arm!r}'s joint states reached this process up to {worst * 1e3:.1f} ms later than "
           "its fastest in the last window (a loaded machine)")
    if raised > cap:
        why += f"; capped at execution.max_start_lead_s = {cap:.3f} s"
    return StartLead(seconds, configured_s, why)
