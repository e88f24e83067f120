"""What other threads ask of one arm's thread during a run, held in one place until that thread
takes it: ``ArmRequests`` (one per arm per run), and the rule for which request wins.

Who may ask: the executor's speed (``core/plan_speed.py``: a speed change, a controlled stop, a
pause, a resume, the end of a pause) from the caller of ``set_speed/stop/pause/resume`` (any
thread: the CLI's signal handlers, the combined action server's callbacks), from the run's
tick, or from another arm's thread (its goal failed: its peers stop). Who takes: the arm's own
thread, only.

Which request wins, stated once:

1. The execution's cancel (``CancelScope``, not held here) ends every arm's part first: a
   request still waiting is dropped with it (the report says the execution was canceled).
2. ``end`` (a paused arm ends at rest instead of waiting for a resume: a stop asked while
   paused) stays once asked. A paused arm takes it before a waiting replacement; a running arm
   takes it when it next rests.
3. A replacement goal waits in **one slot**: a later one replaces one not yet taken (the
   latest wins). The later one was computed from the one it displaces (``PlanSpeed`` keeps the
   goals it last asked for), which follows the running goal up to its own ramp's start, one
   start lead after it was asked; the later ramp starts one start lead after *its* asking. So
   the displaced ramp's part in the goal that goes out lasts only as long as between the two
   requests (milliseconds: a speed change waits for the previous change's stamp, only a stop
   or pause comes sooner), and it is a ramp within the limits continued by one. The displaced
   one is counted (``displaced``), and a stop or pause ramp a later change took over from says
   so in its record (``StopRecord.superseded_at``).
4. The arm's thread takes the waiting replacement in one step under the lock: a request put
   while it takes one stays for its next turn (never lost between reading the slot and
   clearing it).

The request to read what was already delivered (a result that arrived before the joint states
the watch judged) is the arm's channel's (``ros/arm_client.ArmChannel.request_read``): every
such request is served, none replaces another.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.sync import StartStamp


@dataclass(frozen=True)
class Replacement:
    """A goal to replace the arm's running one with.

    ``stamp``: its header stamp (controllers' clock); ``departs_s``: where it departs from the
    running goal (its ramp's start, s on the controllers' clock): a controller that takes it
    later jumps (``core/goal_handover.py``)."""

    trajectory: ArmTrajectory
    stamp: StartStamp
    kind: GoalKind
    departs_s: float


class ArmRequests:
    """One arm's requests during one run (module docstring: who wins). Any thread may put; only
    the arm's thread takes."""

    def __init__(self, arm: str) -> None:
        self.arm = arm
        self._lock = threading.Lock()
        self._slot: Optional[Replacement] = None
        self._end = False
        #: replacements displaced from the slot by a later one before the arm's thread took them
        self.displaced = 0

    def replace(self, replacement: Replacement) -> Optional[Replacement]:
        """Put a replacement goal in the slot; returns the one it displaced, if one waited."""
        with self._lock:
            displaced, self._slot = self._slot, replacement
            if displaced is not None:
                self.displaced += 1
        return displaced

    def end(self) -> None:
        """Ask a paused arm to end at rest (stays once asked)."""
        with self._lock:
            self._end = True

    @property
    def pending(self) -> bool:
        """A replacement waits in the slot."""
        return self._slot is not None

    @property
    def waiting(self) -> Optional[Replacement]:
        """The replacement in the slot, left there (None: none)."""
        with self._lock:
            return self._slot

    @property
    def end_requested(self) -> bool:
        return self._end

    def take(self) -> Optional[Replacement]:
        """The waiting replacement, the slot cleared in the same step (the arm's thread)."""
        with self._lock:
            replacement = self._slot
            self._slot = None
        return replacement
