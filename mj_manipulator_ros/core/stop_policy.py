"""Which stop a failure calls for (docs/executor.md, "Which stop when"), as one table.

Two stops exist. A **controlled stop** ramps every arm to rest along the plan on one plan time
(``core/plan_speed.py``): the arms are still controllable, and every configuration passed is
one of the synchronized plan the gate checked. A **cancel** asks every controller to cancel
its goal (joint_trajectory_controller then holds where it is): for failures where the arms'
state is unknown or a joint is beyond its limit, and wherever no controlled stop is possible
(nothing running yet, a stop already under way, no ramp within the limits).
"""

from __future__ import annotations

from mj_manipulator_ros.core.config import ExecutionSettings
from mj_manipulator_ros.core.sync import FailureReason

#: a failure the execution watch finds -> True: a controlled stop; False: a cancel. A reason
#: not listed (a rejection, a late acceptance, a time-out, a missing server, an exception,
#: an abort, Ctrl-C) is a cancel.
CONTROLLED_STOP_REASONS: dict[FailureReason, bool] = {
    FailureReason.TRACKING_ERROR: True,
    FailureReason.PROGRESS_SKEW: True,
    FailureReason.VELOCITY_LIMIT: False,
    FailureReason.JOINT_STATES_STALE: False,
    FailureReason.JOINT_STATES_INVALID: False,
}


def controlled_stop_for(reason: FailureReason) -> bool:
    """Whether a failure of ``reason`` found by the watch calls for a controlled stop."""
    return CONTROLLED_STOP_REASONS.get(reason, False)


def peers_stop_controlled(settings: ExecutionSettings, arms: int) -> bool:
    """Whether the peers of an arm whose goal ended failed (its controller holds it) stop
    along the plan (True) or are canceled (``execution.cancel_peers_on_failure``, or a plan of
    one arm: there are no peers)."""
    return not settings.cancel_peers_on_failure and arms >= 2
