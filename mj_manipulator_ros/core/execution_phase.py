"""Every state one execution can be in (``MultiArmExecutor.execute``, from its call to its
report): its phases and the one table of their legal transitions, the motion's phases while it
runs and theirs, and the log of the phases it went through with their times. Only the thread
that called ``execute`` changes the execution's phase; any thread may read it. (An arm's part:
``core/arm_phase.py``.)

==============  ==============  ==================================================================
from            to              cause
==============  ==============  ==================================================================
idle            validating      ``execute`` called: validation and the pre-flight gate
idle            waiting         ``execute(checked=True)``: checked already (the execution node's
                                goal callback)
validating      waiting         checked: waiting for a previous execution to end
waiting         held            a pause asked before the start holds it (Ctrl-Z, ``~/pause``)
waiting         approaching     ``approach``: the arms not at the plan's start are moved there
waiting         start_check     every arm where the plan starts? every clock within bounds?
held            approaching     resumed
held            start_check     resumed
approaching     held            a pause asked during the approach holds before the start check
approaching     start_check     the approach succeeded (or nothing needed it)
start_check     held            a pause asked during the checks: hold, then check again
start_check     stamping        checked (and the bag's room, when recording): the arms' threads
                                discover their servers and meet at the gate; the stamp is made
stamping        running         the stamp is made and the goals sent: the motion's own phases
                                are the second table below
running         observing       every arm's thread ended (or their wait did): the stops are
                                measured to rest
idle            done            refused at once: the executor is closed, or an arm thread of an
                                earlier execution never ended
validating      done            the plan refused (validation, the pre-flight gate)
waiting         done            canceled while waiting for a previous execution
held            done            held longer than ``max_pause_s``, or canceled while held
approaching     done            the approach did not succeed (refused, failed, canceled)
start_check     done            the start refused (an arm off the plan's start, a clock off), or
                                canceled during the checks
stamping        done            the gate did not open (an action server missing, canceled): nothing
                                was sent
observing       done            the report is made
==============  ==============  ==================================================================

``running`` never ends directly: a run that ran is observed.

**While running: the motion's phases** (:class:`MotionPhase`, owned by
:class:`core.plan_speed.PlanSpeed`; any thread may ask for these, each under its lock):

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

The motion is ``idle`` in every execution phase but ``running`` and ``observing`` (a pause asked
before the start is the execution's ``held``). Requests that do not apply in a motion phase (a
stop while stopping, a resume while running) are answered False by ``PlanSpeed`` before any
transition is asked for.

Any other transition of either table raises :class:`IllegalTransitionError`: never a silent
ignore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from mj_manipulator_ros.core.phase_table import WordEnum, move


class ExecutionPhase(WordEnum):
    """Where one execution is (see the module docstring's table)."""

    IDLE = "idle"
    VALIDATING = "validating"
    WAITING = "waiting"
    HELD = "held"
    APPROACHING = "approaching"
    START_CHECK = "start_check"
    STAMPING = "stamping"
    RUNNING = "running"
    OBSERVING = "observing"
    DONE = "done"


_E = ExecutionPhase

#: (from, to) -> what causes it (the table of the module docstring)
TRANSITIONS: Mapping[tuple[ExecutionPhase, ExecutionPhase], str] = {
    (_E.IDLE, _E.VALIDATING): "execute called",
    (_E.IDLE, _E.WAITING): "execute called, checked already",
    (_E.VALIDATING, _E.WAITING): "checked: waiting for a previous execution",
    (_E.WAITING, _E.HELD): "a pause before the start",
    (_E.WAITING, _E.APPROACHING): "approach",
    (_E.WAITING, _E.START_CHECK): "the start checks",
    (_E.HELD, _E.APPROACHING): "resumed",
    (_E.HELD, _E.START_CHECK): "resumed",
    (_E.APPROACHING, _E.HELD): "a pause before the start",
    (_E.APPROACHING, _E.START_CHECK): "the approach done",
    (_E.START_CHECK, _E.HELD): "a pause during the start checks",
    (_E.START_CHECK, _E.STAMPING): "checked: the arms meet at the gate",
    (_E.STAMPING, _E.RUNNING): "the stamp is made",
    (_E.RUNNING, _E.OBSERVING): "every arm's thread ended",
    (_E.IDLE, _E.DONE): "refused at once (closed, an arm thread never ended)",
    (_E.VALIDATING, _E.DONE): "the plan refused",
    (_E.WAITING, _E.DONE): "canceled while waiting for a previous execution",
    (_E.HELD, _E.DONE): "held past max_pause_s, or canceled while held",
    (_E.APPROACHING, _E.DONE): "the approach did not succeed",
    (_E.START_CHECK, _E.DONE): "the start refused, or canceled during the checks",
    (_E.STAMPING, _E.DONE): "the gate did not open: nothing sent",
    (_E.OBSERVING, _E.DONE): "the report is made",
}


class MotionPhase(WordEnum):
    """Where a stamped plan's motion is (the second table of the module docstring)."""

    IDLE = "idle"            # no execution stamped: before the start stamp, after the end
    RUNNING = "running"      # the plan runs at the asked speed (a speed change's ramp included)
    PAUSED = "paused"        # ramping to rest on the plan, or at rest there, until resumed
    STOPPING = "stopping"    # a controlled stop ramping every arm to rest: it ends ``stopped``


_MI, _MR, _MP, _MS = MotionPhase.IDLE, MotionPhase.RUNNING, MotionPhase.PAUSED, MotionPhase.STOPPING

#: (from, to) -> what causes it (the motion's table of the module docstring)
MOTION_TRANSITIONS: Mapping[tuple[MotionPhase, MotionPhase], str] = {
    (_MI, _MR): "the start stamp",
    (_MR, _MP): "pause",
    (_MR, _MS): "controlled stop",
    (_MP, _MR): "resume",
    (_MP, _MS): "stop while paused",
    (_MR, _MI): "execution ended",
    (_MP, _MI): "execution ended",
    (_MS, _MI): "execution ended",
}


def motion_transition(current: MotionPhase, wanted: MotionPhase, cause: str) -> MotionPhase:
    """``wanted`` when the motion's table has ``current -> wanted``.

    Raises:
        IllegalTransitionError: it does not (the message lists what ``current`` allows).
    """
    return move(MOTION_TRANSITIONS, current, wanted, cause, "motion phase")


@dataclass
class PhaseLog:
    """One execution's phases: the current one and every one entered, with when (s, the
    monotonic clock) and why. The thread that called ``execute`` writes it."""

    phase: ExecutionPhase = ExecutionPhase.IDLE
    #: (phase, monotonic s, cause), in order; the first entry is IDLE at the log's creation
    entries: list = field(default_factory=list)

    def enter(self, phase: ExecutionPhase, now: float, cause: str = "") -> None:
        """Move to ``phase`` at monotonic time ``now`` (s).

        Raises:
            IllegalTransitionError: the table has no such move (the message lists what the
                current phase allows).
        """
        move(TRANSITIONS, self.phase, phase, cause or TRANSITIONS.get((self.phase, phase), "?"),
             "execution phase")
        if not self.entries:
            self.entries.append((ExecutionPhase.IDLE, now, "made"))
        why = cause or TRANSITIONS[(self.phase, phase)]
        self.phase = phase
        self.entries.append((phase, now, why))

    def durations(self, now: float | None = None) -> dict[str, float]:
        """Seconds spent in each phase entered (a phase entered twice: summed), in the order
        first entered; the current phase counts up to ``now`` unless it is DONE or ``now`` is
        None. IDLE and DONE are left out."""
        out: dict[str, float] = {}
        ends = [t for _, t, _ in self.entries[1:]] + [now]
        for (phase, t, _), end in zip(self.entries, ends):
            if phase in (ExecutionPhase.IDLE, ExecutionPhase.DONE) or end is None:
                continue
            out[phase.value] = out.get(phase.value, 0.0) + max(0.0, end - t)
        return out
