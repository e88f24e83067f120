"""The phases of a stamped plan's motion, owned by :class:`core.plan_speed.PlanSpeed`, and the
one table of their legal transitions: each with what causes it and which thread may.

==========  ==========  ============================================================================
from        to          cause (thread)
==========  ==========  ============================================================================
idle        running     the start stamp is made: ``execute`` (the caller's thread)
running     paused      ``pause``, ``set_speed(0)``, a pause asked before the start, applied at the
                        stamp (any thread: the operator, SIGTSTP, the execution node's service)
running     stopping    ``stop`` (any thread: the operator, Ctrl-C, the combined server's cancel,
                        the watch's failure policy on the clock node's spinner); a pause whose
                        ramp reaches the plan's end
paused      running     ``resume``, ``set_speed(f)`` while paused, after the arms and clocks are
                        checked again (any thread)
paused      stopping    ``stop`` while paused (any thread)
running     idle        the execution ended: ``execute`` returns (the caller's thread)
paused      idle        (the same; ``max_pause_s`` ends a pause through the arms' threads)
stopping    idle        (the same)
==========  ==========  ============================================================================

Any other transition raises :class:`IllegalTransitionError`: never a silent ignore. Requests
that do not apply in a phase (a stop while stopping, a resume while running) are answered
False by ``PlanSpeed`` before any transition is asked for.
"""

from __future__ import annotations

import enum
from typing import Mapping

from mj_manipulator_ros.core.phase_table import move


class MotionPhase(str, enum.Enum):
    """Where a stamped plan's motion is."""

    IDLE = "idle"            # no execution stamped: before the start stamp, after the end
    RUNNING = "running"      # the plan runs at the asked speed (a speed change's ramp included)
    PAUSED = "paused"        # ramping to rest on the plan, or at rest there, until resumed
    STOPPING = "stopping"    # a controlled stop ramping every arm to rest: it ends ``stopped``


_I, _R, _P, _S = MotionPhase.IDLE, MotionPhase.RUNNING, MotionPhase.PAUSED, MotionPhase.STOPPING

#: (from, to) -> what causes it (the table of the module docstring)
TRANSITIONS: Mapping[tuple[MotionPhase, MotionPhase], str] = {
    (_I, _R): "the start stamp",
    (_R, _P): "pause",
    (_R, _S): "controlled stop",
    (_P, _R): "resume",
    (_P, _S): "stop while paused",
    (_R, _I): "execution ended",
    (_P, _I): "execution ended",
    (_S, _I): "execution ended",
}


def transition(current: MotionPhase, wanted: MotionPhase, cause: str) -> MotionPhase:
    """``wanted`` when the table has ``current -> wanted``.

    Raises:
        IllegalTransitionError: it does not (the message lists what ``current`` allows).
    """
    return move(TRANSITIONS, current, wanted, cause, "motion phase")
