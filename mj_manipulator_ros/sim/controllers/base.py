"""The seam between the physics owner and a simulated controller.

:class:`mj_manipulator_ros.sim.shared_model.SharedModel` calls only what is declared here, so
any controller kind (position servos today; torque, an actuator twin) plugs in without changing
the physics owner or the action servers.
"""

from __future__ import annotations

from typing import Optional, Protocol

import numpy as np

from mj_manipulator_ros.sim.goal import ControllerGoal, GoalTicket
from mj_manipulator_ros.sim.sim_config import ArmFaults


class SimulatedController(Protocol):
    """One arm's simulated controller.

    Threading: :meth:`submit` and :meth:`cancel` are called from action-server threads and must
    only hand requests over (a locked slot); :meth:`update` runs in the physics thread once per
    control cycle and is the only method that changes the active goal.

    Attributes:
        joint_names: the arm's joints, controller order (J,).
        actuator_ids: the model actuators whose ``ctrl`` :meth:`update`'s command is written to,
            shape (A,).
        faults: injected faults (replaceable at run time).
    """

    joint_names: tuple[str, ...]
    actuator_ids: np.ndarray
    faults: ArmFaults

    def submit(self, goal: ControllerGoal) -> GoalTicket:
        """Hand over a checked goal; it preempts the active one at the next cycle."""

    def cancel(self, ticket: GoalTicket) -> None:
        """Request that ``ticket``'s goal stops (it ends CANCELED at the next cycle)."""

    @property
    def active(self) -> Optional[GoalTicket]:
        """The goal being executed, if any."""

    def abort_active(self, q: np.ndarray, text: str) -> None:
        """Physics thread: end the active (and a pending) goal ABORTED with ``text`` and hold
        ``q`` (J,): the simulator itself cannot keep up (``sim.max_lag_s``)."""

    def update(self, now: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """One control cycle: ``now`` on the controller clock (s), measured positions ``q`` and
        velocities ``qd`` (J,). Returns the command for :attr:`actuator_ids` (A,); a controller
        of twin-owned joints (``sim.physics: cosim``, no actuators) returns its MIT command
        rows ``[q_ref, v_ref, kp, kd, tau_ff]`` (5, J) for the actuator twin instead."""
