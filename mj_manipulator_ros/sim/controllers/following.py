"""What every simulated controller kind shares: a JTC trajectory follower behind the seam.

:class:`FollowingController` hands goals, cancels and faults to its
:class:`~mj_manipulator_ros.sim.trajectory_follower.TrajectoryFollower`; a kind adds only what it
writes to its actuators (:meth:`update`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from mj_manipulator_ros.sim.goal import ControllerGoal, GoalTicket
from mj_manipulator_ros.sim.sim_config import ArmFaults
from mj_manipulator_ros.sim.trajectory_follower import TrajectoryFollower


class FollowingController:
    """Args: joint_names (J,), initial hold positions (J,), faults of this arm."""

    def __init__(self, joint_names: tuple[str, ...], hold: np.ndarray, faults: ArmFaults) -> None:
        self.joint_names = joint_names
        self.follower = TrajectoryFollower(joint_names, hold, faults)

    @property
    def faults(self) -> ArmFaults:
        return self.follower.faults

    @faults.setter
    def faults(self, value: ArmFaults) -> None:
        self.follower.faults = value

    @property
    def active(self) -> Optional[GoalTicket]:
        return self.follower.active

    def submit(self, goal: ControllerGoal) -> GoalTicket:
        return self.follower.submit(goal)

    def cancel(self, ticket: GoalTicket) -> None:
        self.follower.cancel(ticket)

    def abort_active(self, q: np.ndarray, text: str) -> None:
        """Physics thread: end the active goal ABORTED (-4) with ``text``, holding ``q``."""
        self.follower.abort_active(q, text)
