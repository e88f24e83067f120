"""Where one arm's part of an execution is (``ros/arm_client.ArmRun``), and the one table of its
legal transitions. Only the arm's own thread changes its phase; any thread may read it.

===========  ===========  ========================================================================
from         to           cause
===========  ===========  ========================================================================
idle         discovering  the arm's thread starts (``ArmRun.run``)
discovering  at_gate      its action server is there and settled: the goal is built, the arm
                          waits for the shared start stamp
at_gate      sending      the gate opened: the plan's goal, stamped, is sent
sending      running      the controller accepted it
running      replacing    a controlled change asked for a replacement goal (speed, stop, pause,
                          resume: ``core/goal_kind.py``); it is sent
replacing    running      the controller accepted it: it is the goal running
running      paused       the pause's goal succeeded: at rest on the plan, no goal active
paused       replacing    resume: the resume's goal is sent
sending      stopping     (any of these) the execution fails or is canceled with a goal that
running      stopping     is, or may be, active: it is canceled and its end awaited
replacing    stopping
any          done         the arm's part has ended: its goal's result read, its stop confirmed
                          or said unconfirmed, nothing sent, or refused
===========  ===========  ========================================================================

Any other transition raises :class:`IllegalTransitionError`. How the arm's goal *ended* is its
report's ``ArmStatus``; the phase says where the arm's thread is now.
"""

from __future__ import annotations

from typing import Mapping

from mj_manipulator_ros.core.phase_table import WordEnum, move


class ArmPhase(WordEnum):
    """Where one arm's part of an execution is (see the module docstring's table)."""

    IDLE = "idle"                # made, its thread not started
    DISCOVERING = "discovering"  # waiting for its action server (bounded), then settling
    AT_GATE = "at_gate"          # goal built, waiting for the shared start stamp
    SENDING = "sending"          # the plan's goal sent, its accept/reject awaited
    RUNNING = "running"          # a goal runs (the plan, or a replacement: ``goal_kind``)
    REPLACING = "replacing"      # a replacement goal sent, its acceptance awaited
    PAUSED = "paused"            # at rest on the plan after a pause, no goal active
    STOPPING = "stopping"        # its goal canceled, the cancel's answer and result awaited
    DONE = "done"                # its part has ended


_P = ArmPhase

#: (from, to) -> what causes it (the table of the module docstring); DONE is reachable from any
#: phase but itself
TRANSITIONS: Mapping[tuple[ArmPhase, ArmPhase], str] = {
    (_P.IDLE, _P.DISCOVERING): "the arm's thread starts",
    (_P.DISCOVERING, _P.AT_GATE): "the action server is there",
    (_P.AT_GATE, _P.SENDING): "the gate opened",
    (_P.SENDING, _P.RUNNING): "the goal was accepted",
    (_P.RUNNING, _P.REPLACING): "a replacement goal is sent",
    (_P.REPLACING, _P.RUNNING): "the replacement was accepted",
    (_P.RUNNING, _P.PAUSED): "the pause's goal succeeded",
    (_P.PAUSED, _P.REPLACING): "resume",
    (_P.SENDING, _P.STOPPING): "canceled with the goal in flight",
    (_P.RUNNING, _P.STOPPING): "canceled while running",
    (_P.REPLACING, _P.STOPPING): "canceled while replacing",
    **{(p, _P.DONE): "the arm's part ended" for p in ArmPhase if p is not _P.DONE},
}


def arm_transition(current: ArmPhase, wanted: ArmPhase, cause: str, arm: str = "") -> ArmPhase:
    """``wanted`` when the table has ``current -> wanted``.

    Raises:
        IllegalTransitionError: it does not (the message names the arm and lists what
            ``current`` allows).
    """
    return move(TRANSITIONS, current, wanted, cause, f"arm {arm!r} phase")
