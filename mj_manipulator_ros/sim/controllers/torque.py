"""The torque controller: joint_trajectory_controller semantics, computed torque on the arm's
motors (``model/torque_drive.py`` adds them), as an arm driven in torque mode.

Per control cycle, with the reference (p, v, a) of the trajectory follower (the same JTC rows as
the position controller: stamps, tolerances, cancel, preemption, faults) and the measured q, qd:

    qdd_cmd = a + Kp (p - q) + Kd (v - qd)             Kp = omega^2, Kd = 2 omega (omega = 2 pi f)
    tau     = RNEA_own(q, qd, qdd_cmd) + armature qdd_cmd + damping qd + friction tanh(v / 0.01)

clamped to each motor's force range. RNEA runs on the arm's *own* model (its robot file alone:
no scene, no other arm, no payload): the feed-forward never reads the simulation's
``qfrc_bias``. The sign convention is the equation of motion's: holding still, the applied
torque equals the bias (gravity) torque. Efforts in /joint_states are the applied motor torques.

The friction feed-forward takes its sign from the *reference* velocity v, not the measured qd:
at a reversal the measured velocity dithers around zero and a feed-forward that follows it
fights the joint's own stiction (1.05 mrad on the OpenArm's J5 in the sine benchmark against
0.34 mrad with the reference's sign); holding still (v = 0) it adds nothing.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, ArmBinding
from mj_manipulator_ros.model.torque_drive import OwnModel
from mj_manipulator_ros.resources import resolve_model
from mj_manipulator_ros.sim.controllers.following import FollowingController
from mj_manipulator_ros.sim.sim_config import ArmFaults, ArmSimSettings

FRICTION_VELOCITY = 0.01  # rad/s: the smooth sign of the friction feed-forward (on v)


class TorqueController(FollowingController):
    """Args:
        binding: the arm (its joints must have the motors the torque drive adds).
        hold: initial positions (J,).
        faults: injected faults.
        settings: the arm's ``sim.arms`` entry (bandwidth, nulling).
        scene: the scene (for the arm's robot file and the model's limits).
    """

    def __init__(self, binding: ArmBinding, hold: np.ndarray, faults: ArmFaults = ArmFaults(),
                 settings: ArmSimSettings = ArmSimSettings(controller="torque"), scene=None) -> None:
        if scene is None or binding.name not in scene.torque_arms:
            raise ConfigError(f"arm {binding.name!r}: the torque controller needs the scene built "
                              "with a torque drive for it (SimConfig.build_scene does this)")
        super().__init__(binding.joint_names, hold, faults)
        model = scene.model
        motors, servos = [], []
        for joint, acts in zip(binding.joint_names, binding.actuators):
            mine = [a for a in acts if a.kind is ActuatorKind.MOTOR
                    and model.actuator(a.id).name == f"{joint}_torque"]
            if len(mine) != 1:
                raise ConfigError(f"arm {binding.name!r}: joint {joint!r} has no torque motor")
            motors.append(mine[0].id)
            servos.append([a for a in acts if a.kind is ActuatorKind.POSITION])
        self.motor_ids = np.array(motors, dtype=int)
        self.nulling = settings.nulling
        self._null = []  # (servo id, kv/kp) nulled each cycle with nulling "full"
        if self.nulling == "full":
            self._null = [(a.id, a.kv / a.kp) for group in servos for a in group]
        null_ids = np.array([i for i, _ in self._null], dtype=int)
        self._null_joint = np.array([k for k, group in enumerate(servos) for _ in group], dtype=int)
        self._null_ratio = np.array([r for _, r in self._null])
        self.actuator_ids = np.concatenate([self.motor_ids, null_ids])
        lo = np.where(model.actuator_forcelimited[self.motor_ids],
                      model.actuator_forcerange[self.motor_ids, 0], -np.inf)
        hi = np.where(model.actuator_forcelimited[self.motor_ids],
                      model.actuator_forcerange[self.motor_ids, 1], np.inf)
        self.force_low, self.force_high = lo, hi
        bw = settings.bandwidth_hz
        hz = np.array([bw.get(j, 5.0) if isinstance(bw, dict) or hasattr(bw, "get") else float(bw)
                       for j in binding.joint_names])
        omega = 2 * math.pi * hz
        self.kp, self.kd = omega**2, 2 * omega
        self.own = own_model(scene, binding)
        self.last_torque = np.zeros(len(binding.joint_names))

    def update(self, now: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        p = self.follower.update(now, q, qd)
        ref = self.follower.reference
        v, a = (ref[1], ref[2]) if ref is not None else (0.0 * q, 0.0 * q)
        qdd = a + self.kp * (p - q) + self.kd * (v - qd)
        own = self.own
        tau = (own.inverse_dynamics(q, qd, qdd) + own.armature * qdd + own.damping * qd
               + own.frictionloss * np.tanh(v / FRICTION_VELOCITY))
        tau = np.clip(tau, self.force_low, self.force_high)
        self.last_torque = tau
        if not self._null:
            return tau
        # nulling "full": each servo's force kp (ctrl - q) - kv qd is zero at ctrl = q + kv/kp qd
        return np.concatenate([tau, q[self._null_joint] + self._null_ratio * qd[self._null_joint]])


def own_model(scene, binding: ArmBinding) -> OwnModel:
    """The arm's own robot file (the scene model whose file holds its joints), compiled alone."""
    config = scene.config
    for m in config.models:
        path = resolve_model(m.file, config.base_dir)
        spec = mujoco.MjSpec.from_file(str(path))
        names = {j.name for j in spec.joints}
        local = [j[len(m.prefix):] if m.prefix and j.startswith(m.prefix) else j
                 for j in binding.joint_names]
        if all(j in names for j in local) and all(
                j.startswith(m.prefix) for j in binding.joint_names):
            return OwnModel.from_file(path, binding.joint_names, m.prefix)
    raise ConfigError(f"arm {binding.name!r}: no single robot file of the scene holds all its "
                      f"joints {list(binding.joint_names)}; the torque controller needs the arm's "
                      "own file for its dynamics model")
