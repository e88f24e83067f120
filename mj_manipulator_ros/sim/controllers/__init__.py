"""Simulated controllers behind one seam (:class:`.base.SimulatedController`).

A controller gets goals and cancels from the action server (any thread) and, once per control
cycle in the physics thread, the arm's measured state; it returns the command for the actuators
it drives. :func:`make_controller` picks the kind per arm (``sim.arms.<arm>.controller``).

A new kind (a torque controller, an actuator model) goes in a module of its own here and an
entry in :data:`KINDS`; ``sim_config.CONTROLLER_KINDS`` lists the names a file may use.
"""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ArmBinding
from mj_manipulator_ros.sim.controllers.base import SimulatedController
from mj_manipulator_ros.sim.controllers.mit import MitController
from mj_manipulator_ros.sim.controllers.position import PositionController
from mj_manipulator_ros.sim.controllers.torque import TorqueController
from mj_manipulator_ros.sim.sim_config import CONTROLLER_KINDS, ArmFaults, ArmSimSettings

KINDS: dict[str, type] = {"position": PositionController, "torque": TorqueController,
                          "mit": MitController}
assert tuple(KINDS) == CONTROLLER_KINDS, "sim_config.CONTROLLER_KINDS and KINDS must agree"


def make_controller(kind: str, binding: ArmBinding, hold: np.ndarray, faults: ArmFaults,
                    settings: ArmSimSettings | None = None, scene=None) -> SimulatedController:
    """The controller of one arm.

    Args:
        kind: a key of :data:`KINDS`.
        binding: the arm's indices into the model.
        hold: the arm's initial positions (J,), held until the first goal.
        faults: the arm's injected faults.
        settings: the arm's ``sim.arms`` entry.
        scene: the scene (a torque controller needs its drive and the arm's robot file).

    Raises:
        ConfigError: unknown kind, or the model lacks what the kind drives.
    """
    if kind not in KINDS:
        raise ConfigError(f"arm {binding.name!r}: unknown simulated controller {kind!r}; "
                          f"available: {sorted(KINDS)}")
    return KINDS[kind](binding, hold, faults, settings or ArmSimSettings(controller=kind), scene)
