"""Where the time went between a combined goal's arrival at the execution node and its start
stamp (the moment the arms depart): what MoveIt's execution monitoring counts against the goal
(it allows ``duration x 1.2 + 0.5 s`` from sending, by default), so every goal says it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

#: the execution's phases before the stamp (``core/execution_phase.py``), in order
BEFORE_STAMP = ("validating", "waiting", "held", "approaching", "start_check", "stamping")


@dataclass(frozen=True)
class GoalTiming:
    """A combined goal's checks in the goal callback, before it is accepted.

    Attributes:
        arrival_s: when the goal callback began (the node's clock, the one stamps are on), s.
        conversion_s: splitting the goal per arm (s, wall).
        checks_s: validation and the pre-flight gate (s, wall).
        start_check_s: the start state and the clocks (s, wall).
        accepted_at: when the goal callback accepted it (monotonic s).
        to_execute_s: from acceptance until the execute callback ran the executor (s, wall).
    """

    arrival_s: float
    conversion_s: float
    checks_s: float
    start_check_s: float
    accepted_at: float = 0.0
    to_execute_s: float = 0.0

    def text(self, start_stamp: Optional[float], phase_times: Mapping[str, float],
             lead_s: Optional[float]) -> str:
        """One line: arrival to start stamp, and each part (s): the goal callback's checks,
        the wait for the execute callback, the execution's phases before the stamp, and the
        stamp's lead (``lead_s``, the stamp made that far ahead)."""
        parts = [f"conversion {self.conversion_s:.3f}",
                 f"validation and pre-flight {self.checks_s:.3f}",
                 f"start check {self.start_check_s:.3f}",
                 f"accepted to executing {self.to_execute_s:.3f}"]
        parts += [f"then {p.replace('_', ' ')} {phase_times[p]:.3f}" for p in BEFORE_STAMP
                  if p in phase_times]
        if start_stamp is not None and lead_s is not None:
            parts.append(f"start lead {lead_s:.3f}")
        head = ("no start stamp was made" if start_stamp is None else
                f"arrival to start stamp {start_stamp - self.arrival_s:.3f} s")
        return f"{head} ({', '.join(parts)} s)"
