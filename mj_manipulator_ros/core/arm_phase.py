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
running      stopping     is, or may be, active (in flight included), or a replacement failed:
replacing    stopping     the goal is canceled (a no-op for one that has ended) and its result
                          read
idle         done         the arm's thread could not be started: nothing sent
discovering  done         no action server in time, or the execution ended first: nothing sent
at_gate      done         the gate did not open: nothing sent
sending      done         the controller rejected the goal
running      done         its goal's result was read
paused       done         the execution ended while paused (the end asked, a cancel, the bound)
stopping     done         the cancel's answer and the result read, or said missing
===========  ===========  ========================================================================

``replacing`` never ends directly: the goal it replaces may still run (a rejected replacement
leaves it running), so the arm goes through ``stopping``, whose cancel is answered "terminated"
when it had ended.

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

#: (from, to) -> what causes it (the table of the module docstring)
TRANSITIONS: Mapping[tuple[ArmPhase, ArmPhase], str] = {
    (_P.IDLE, _P.DISCOVERING): "the arm's thread starts",
    (_P.DISCOVERING, _P.AT_GATE): "the action server is there",
    (_P.AT_GATE, _P.SENDING): "the gate opened",
    (_P.SENDING, _P.RUNNING): "the goal was accepted",
    (_P.RUNNING, _P.REPLACING): "a replacement goal is sent",
    (_P.REPLACING, _P.RUNNING): "the replacement was accepted",
    (_P.RUNNING, _P.PAUSED): "the pause's goal succeeded",
    (_P.PAUSED, _P.REPLACING): "resume",
    (_P.SENDING, _P.STOPPING): "canceled, or not answered in time, with the goal in flight",
    (_P.RUNNING, _P.STOPPING): "canceled while running",
    (_P.REPLACING, _P.STOPPING): "canceled while replacing, or the replacement failed",
    (_P.IDLE, _P.DONE): "its thread could not be started",
    (_P.DISCOVERING, _P.DONE): "no action server, or the execution ended first",
    (_P.AT_GATE, _P.DONE): "the gate did not open",
    (_P.SENDING, _P.DONE): "the goal was rejected",
    (_P.RUNNING, _P.DONE): "its goal's result was read",
    (_P.PAUSED, _P.DONE): "the execution ended while paused",
    (_P.STOPPING, _P.DONE): "the cancel's answer and the result read, or said missing",
}


def arm_transition(current: ArmPhase, wanted: ArmPhase, cause: str, arm: str = "") -> ArmPhase:
    """``wanted`` when the table has ``current -> wanted``.

    Raises:
        IllegalTransitionError: it does not (the message names the arm and lists what
            ``current`` allows).
    """
    return move(TRANSITIONS, current, wanted, cause, f"arm {arm!r} phase")
