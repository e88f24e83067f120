"""What an arm's running goal is: the plan as stamped, or one of the replacement goals a
controlled change sends (``core/plan_speed.PlanSpeed``: a speed change, a controlled stop, a
pause, a resume). The kind decides what its success means for the arm
(``ros/arm_client.ArmRun``) and what a late handover does (``core/goal_handover.py``):

=========  =====================================  ==============================================
kind       its success leaves the arm                taken after its ramp began (a jump)
=========  =====================================  ==============================================
plan       SUCCEEDED, at the plan's end              (the start lead's ``late_acceptance``)
speed      on the plan at the new speed (no result)  fails the execution, ``late_acceptance``
resume     on the plan again (no result)             fails the execution, ``late_acceptance``
stop       STOPPED (controlled), at rest on the plan said in the arm's report; the ramp goes on
pause      at rest on the plan, waiting for resume   said in the arm's report; the ramp goes on
=========  =====================================  ==============================================

A str enum: its values are the words the reports and records have always carried.
"""

from __future__ import annotations

from mj_manipulator_ros.core.phase_table import WordEnum


class GoalKind(WordEnum):
    """What an arm's running goal is (see the module docstring's table)."""

    PLAN = "plan"
    SPEED = "speed"
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"

    @property
    def ramps_to_rest(self) -> bool:
        """A replacement that brings the arm to rest: taken late, the arm's report says so and
        the ramp goes on (a cancel would hold the arm where it is, from full speed)."""
        return self in (GoalKind.STOP, GoalKind.PAUSE)

    @property
    def words(self) -> str:
        """How a failure message names a goal that ramps to rest ('' for any other: its
        failure is the plan's)."""
        return {GoalKind.STOP: "the controlled stop's goal",
                GoalKind.PAUSE: "the pause's goal"}.get(self, "")
