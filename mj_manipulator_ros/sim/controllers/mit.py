"""The MIT-mode controller: joint_trajectory_controller semantics commanding an actuator twin.

Under ``sim.physics: cosim`` an arm's joints are the actuator twin's (``sim/actuator_twin.py``),
driven as the OpenArm's motors are, in MIT mode: the driver closes

    tau = kp (q_ref - q) + kd (v_ref - v) + tau_ff

at the twin's 20 kHz; this controller sends, once per control cycle, the reference of the same
trajectory follower as every other kind (stamps, tolerances, cancel, preemption, faults) as
q_ref, v_ref, and a feed-forward from the arm's own model (its robot file alone):

    tau_ff = RNEA_own(p, v, a) + armature a + damping v + frictionloss tanh(v / 0.01)

kp, kd default to the robot file's position servo gains of each joint (the same stiffness the
position simulator gives it); ``sim.arms.<arm>.mit_kp`` / ``mit_kd`` set one value for every
joint (the OpenArm driver's defaults: 20, 2.75), and ``mit_feed_forward: false`` sends
``tau_ff = 0`` (the driver's default: no gravity compensation). :meth:`update` returns the command as rows
``[q_ref, v_ref, kp, kd, tau_ff]`` (5, J) for the physics owner to hand to the twin; the model
has no actuators on these joints (``actuator_ids`` is empty).
"""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ArmBinding
from mj_manipulator_ros.sim.controllers.following import FollowingController
from mj_manipulator_ros.sim.controllers.torque import FRICTION_VELOCITY, own_model
from mj_manipulator_ros.sim.sim_config import ArmFaults, ArmSimSettings


class MitController(FollowingController):
    """Args:
        binding: the arm (on the twin-owned scene).
        hold: initial positions (J,).
        faults: injected faults.
        settings: the arm's ``sim.arms`` entry.
        scene: the twin-owned scene (its ``twin`` record gives the servo gains).
    """

    def __init__(self, binding: ArmBinding, hold: np.ndarray, faults: ArmFaults = ArmFaults(),
                 settings: ArmSimSettings = ArmSimSettings(controller="mit"), scene=None) -> None:
        if scene is None or binding.name not in getattr(scene, "twin", {}):
            raise ConfigError(f"arm {binding.name!r}: controller 'mit' drives an actuator twin; "
                              "set sim.physics: cosim")
        super().__init__(binding.joint_names, hold, faults)
        joints = scene.twin[binding.name]
        self.kp, self.kd = joints.kp.copy(), joints.kv.copy()
        if settings.mit_kp is not None:
            self.kp[:] = settings.mit_kp
        if settings.mit_kd is not None:
            self.kd[:] = settings.mit_kd
        self.feed_forward = settings.mit_feed_forward
        missing = [j for j, k in zip(binding.joint_names, self.kp) if not k > 0]
        if missing:
            raise ConfigError(f"arm {binding.name!r}: joint(s) {missing} have no position servo "
                              "in the robot file to take MIT gains from")
        self.actuator_ids = np.zeros(0, dtype=int)
        self.own = own_model(scene, binding)
        self.command = np.zeros((5, len(binding.joint_names)))
        self.command[2], self.command[3] = self.kp, self.kd

    def update(self, now: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        p = self.follower.update(now, q, qd)
        ref = self.follower.reference
        v, a = (ref[1], ref[2]) if ref is not None else (np.zeros_like(q), np.zeros_like(q))
        own = self.own
        cmd = self.command
        cmd[0], cmd[1] = p, v
        if self.feed_forward:
            cmd[4] = (own.inverse_dynamics(p, v, a) + own.armature * a + own.damping * v
                      + own.frictionloss * np.tanh(v / FRICTION_VELOCITY))
        return cmd
