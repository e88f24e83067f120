"""The position controller: joint_trajectory_controller semantics writing each joint's position
servo (``ctrl`` = the reference position), as ros2_control's position command interface does."""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.model.arm_binding import ArmBinding
from mj_manipulator_ros.sim.controllers.following import FollowingController
from mj_manipulator_ros.sim.sim_config import ArmFaults


class PositionController(FollowingController):
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
        super().__init__(binding.joint_names, hold, faults)

    def update(self, now: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return self.follower.update(now, q, qd)
