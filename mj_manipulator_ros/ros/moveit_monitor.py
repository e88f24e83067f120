"""A FollowJointTrajectory client that watches its goal as MoveIt's trajectory execution manager
does with its defaults: the goal must end within ``duration x 1.2 + 0.5 s``
(``allowed_execution_duration_scaling``, ``allowed_goal_duration_margin``), counted from the
moment the goal is sent; past it MoveIt logs "Controller is taking too long to execute
trajectory" and cancels the goal. The demo, the goal-latency benchmark and the suite's MoveIt
test send their goals through it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

from action_msgs.msg import GoalStatus

#: MoveIt's trajectory execution manager's defaults
MOVEIT_SCALING, MOVEIT_MARGIN_S = 1.2, 0.5
#: how long a result is waited for after the monitor canceled the goal, s
CANCELED_RESULT_WAIT_S = 30.0


@dataclass(frozen=True)
class MonitoredGoal:
    """One goal as the monitor saw it; times in s from sending (steady clock).

    Attributes:
        bound_s: MoveIt's bound for the goal (``duration x scaling + margin``).
        accepted: whether the server accepted it (None: no answer within the wait).
        accepted_after_s: sending to the answer (None: no answer).
        result_after_s: sending to the result (None: none came).
        timed_out: the bound passed with no result: the monitor canceled the goal, as MoveIt.
        status: the result's GoalStatus (None: no result).
        error_string: the result's error_string ('' when none).
    """

    bound_s: float
    accepted: Optional[bool]
    accepted_after_s: Optional[float]
    result_after_s: Optional[float]
    timed_out: bool
    status: Optional[int]
    error_string: str = ""

    @property
    def slack_s(self) -> Optional[float]:
        """The bound less the time to the result (negative: MoveIt would have canceled)."""
        return None if self.result_after_s is None else self.bound_s - self.result_after_s

    @property
    def succeeded(self) -> bool:
        return self.status == GoalStatus.STATUS_SUCCEEDED and not self.timed_out


def send_monitored(client, executor, goal, duration_s: float, answer_wait_s: float = 60.0,
                   scaling: float = MOVEIT_SCALING, margin_s: float = MOVEIT_MARGIN_S,
                   on_spin: Optional[Callable[[], None]] = None,
                   spin_s: float = 0.01) -> MonitoredGoal:
    """Send ``goal`` (a FollowJointTrajectory goal of ``duration_s`` s) on ``client`` (an
    ActionClient spun by ``executor``, in this thread) and watch it as MoveIt does: the bound
    runs from sending; past it with no result, the goal is canceled and its result read.
    ``on_spin``: called after every spin (a viewer, say). Every wait is bounded: the answer
    by ``answer_wait_s``, the result by the bound (then ``CANCELED_RESULT_WAIT_S`` more)."""
    bound = duration_s * scaling + margin_s
    sent = time.monotonic()
    future = client.send_goal_async(goal)
    executor.spin_until_future_complete(future, timeout_sec=answer_wait_s)
    handle = future.result() if future.done() else None
    if handle is None:
        return MonitoredGoal(bound, None, None, None, False, None,
                             f"no answer within {answer_wait_s:g} s of sending")
    accepted_after = time.monotonic() - sent
    if not handle.accepted:
        return MonitoredGoal(bound, False, accepted_after, None, False, None, "rejected")
    result = handle.get_result_async()
    timed_out = False
    deadline = sent + bound
    while not result.done():
        now = time.monotonic()
        if not timed_out and now > deadline:
            # MoveIt: "Controller is taking too long to execute trajectory ... Stopping"
            timed_out = True
            handle.cancel_goal_async()
            deadline = now + CANCELED_RESULT_WAIT_S
        elif timed_out and now > deadline:
            break
        executor.spin_once(timeout_sec=spin_s)
        if on_spin is not None:
            on_spin()
    if not result.done():
        return MonitoredGoal(bound, True, accepted_after, None, timed_out, None,
                             f"no result within {CANCELED_RESULT_WAIT_S:g} s of canceling")
    out = result.result()
    return MonitoredGoal(bound, True, accepted_after, time.monotonic() - sent, timed_out,
                         out.status, out.result.error_string)
