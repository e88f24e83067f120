"""The position controller: joint_trajectory_controller semantics writing each joint's position
servo (``ctrl`` = the reference position), as ros2_control's position command interface does."""

from __future__ import annotations

from typing import Optional

import numpy as np

from mj_manipulator_ros.model.arm_binding import ArmBinding
from mj_manipulator_ros.sim.goal import ControllerGoal, GoalTicket
from mj_manipulator_ros.sim.sim_config import ArmFaults
from mj_manipulator_ros.sim.trajectory_follower import TrajectoryFollower


class PositionController:
    """Drives one position servo per joint (the binding must have them).

    Args:
        binding: the arm; each joint needs exactly one position servo.
        hold: initial positions (J,).
        faults: injected faults.
        settings, scene: unused (the seam passes them to every kind).

    Raises:
        ConfigError: a joint without exactly one position servo.
    """

    def __init__(self, binding: ArmBinding, hold: np.ndarray, faults: ArmFaults = ArmFaults(),
                 settings=None, scene=None) -> None:
        self.servos = binding.position_servos()
        self.actuator_ids = self.servos.actuator_ids
        self.joint_names = binding.joint_names
        self.follower = TrajectoryFollower(binding.joint_names, hold, faults)

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

    def update(self, now: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return self.follower.update(now, q, qd)
