"""The start stamp's lead as the measured need: how long this arm's controller takes to take a
goal of this size now.

Every arm's first goal of a plan carries the start stamp (now + lead): the lead is the time the
controllers have to take their goals before the plan begins; a goal taken after the stamp fails
the execution (``late_acceptance``: the arms would not start together). A fixed lead long enough
for a loaded machine is dead time on every plan (0.25 s; a goal is taken in 15-30 ms on the
simulated OpenArm here, idle or beside a busy loop). So the lead is measured, per arm:

- **a probe now**: just before the gate, each arm's thread times one round trip to its
  controller's action server (a CancelGoal for a goal id that does not exist; the cancel
  service is served by the same executor that takes goals). A load that arrived after a quiet
  history, on this process or the controller's, shows here.
- **its history**: for the arm's recent plan goals (the last ``HISTORY``), the time from sending
  to the controller's taking it, less the probe measured before it: what a goal costs beyond a
  round trip (its serialization, the controller's checks), scaled by the number of points when
  this goal has more.

``need = probe now + the largest such cost``, and never less than the longest of those goals
took in all, sent to taken (scaled alike): one quick probe is one sample of a loaded machine's
round trips, which vary more than a goal's cost beyond one (a probe of 5 ms after goals that took
80 ms with a 50 ms probe would otherwise give a need of 35 ms). The lead is ``LEAD_FACTOR x`` the slowest arm's
need, at least ``execution.start_lead_floor_s``, at most ``execution.start_lead_s`` (which wins
over the floor; floor = ceiling is a fixed lead). An arm with no history yet (its first goal in
this process), or whose probe was not answered, gets the ceiling: nothing measured, nothing
shortened. All times on the controllers' clock, s.
"""

from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass
from typing import Mapping, Optional

#: how many of an arm's latest plan goals its need is read from
HISTORY = 20
#: the lead is this many times the slowest arm's need (the need is already the largest cost of
#: the history; this is headroom for a goal slower than any of them: a loaded suite saw goals
#: taken 2.06-2.55 x the need, late on a lead of 2 x: test_measured_lead's SLOW_TAKES)
LEAD_FACTOR = 3.0


@dataclass(frozen=True)
class Acceptance:
    """One plan goal of one arm: its points, the probe's round trip just before it, and its
    sending to the controller's taking it (s, controllers' clock)."""

    points: int
    probe_s: float
    accept_s: float


class AcceptanceHistory:
    """One arm's recent :class:`Acceptance` records (any thread)."""

    def __init__(self, keep: int = HISTORY) -> None:
        self._past: collections.deque[Acceptance] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, acceptance: Acceptance) -> None:
        """Record a goal that was taken; ignored unless every figure is finite and >= 0."""
        figures = (acceptance.probe_s, acceptance.accept_s)
        if acceptance.points > 0 and all(math.isfinite(f) and f >= 0.0 for f in figures):
            with self._lock:
                self._past.append(acceptance)

    def need(self, points: int, probe_s: float) -> Optional[float]:
        """How long a goal of ``points`` points needs to be taken, with the probe's round trip
        just measured (``probe_s``; inf: not answered). None: nothing measured (no history, or
        no probe answer)."""
        with self._lock:
            past = list(self._past)
        if not past or not math.isfinite(probe_s):
            return None
        scale = [max(1.0, points / a.points) for a in past]
        cost = max(max(0.0, a.accept_s - a.probe_s) * k for a, k in zip(past, scale))
        # never less than a recent goal took in all: a quick probe now is one sample, and a
        # loaded machine's round trips vary more than its goals' cost beyond one
        taken = max(a.accept_s * k for a, k in zip(past, scale))
        return max(probe_s + cost, taken)

    def __len__(self) -> int:
        with self._lock:
            return len(self._past)


def start_lead(needs: Mapping[str, Optional[float]], floor_s: float, ceiling_s: float) -> float:
    """The lead (s) for the arms' ``needs`` (None: not measured): ``LEAD_FACTOR`` x the largest,
    within [floor_s, ceiling_s] (the ceiling wins); the ceiling when any arm's need is not
    measured."""
    if not needs or any(n is None for n in needs.values()):
        return ceiling_s
    return min(ceiling_s, max(floor_s, LEAD_FACTOR * max(needs.values())))
