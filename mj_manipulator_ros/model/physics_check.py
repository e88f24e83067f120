"""Is the physics timestep small enough for the position servos?

A position servo on joint i behaves like a spring-damper on the joint's effective inertia
I (the diagonal of the joint-space inertia matrix at the start pose, armature included):

    omega = sqrt(kp / I)                      natural frequency, rad/s
    zeta  = (kv + damping) / (2 sqrt(kp I))   damping ratio

An explicit-ish step of dt resolves it when omega * dt <= max(1, zeta); beyond that the servo
rings or goes unstable. ``timestep: auto`` picks the largest dt = control_period / 2**j that
passes every servo of every arm. Joints without a position servo are not checked here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable

import mujoco
import numpy as np

from mj_manipulator_ros.model.arm_binding import ActuatorKind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServoCheck:
    joint: str
    inertia: float      # kg m^2 (or kg for a slide joint)
    omega: float        # rad/s
    zeta: float
    omega_dt: float
    ok: bool


def servo_checks(model: mujoco.MjModel, arms: Iterable, qpos: np.ndarray, dt: float) -> list[ServoCheck]:
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    out = []
    for arm in arms:
        for k, name in enumerate(arm.joint_names):
            servos = [a for a in arm.actuators[k] if a.kind is ActuatorKind.POSITION]
            if not servos:  # a joint driven otherwise (a motor) has no servo to resolve
                continue
            dof = int(arm.dof_adr[k])
            inertia = float(full[dof, dof])
            kp, kv = sum(a.kp for a in servos), sum(a.kv for a in servos)
            damping = float(model.dof_damping[dof])
            omega = float(np.sqrt(kp / inertia))
            zeta = (kv + damping) / (2.0 * np.sqrt(kp * inertia))
            out.append(ServoCheck(name, inertia, omega, zeta, omega * dt, omega * dt <= max(1.0, zeta)))
    return out


def choose_timestep(model: mujoco.MjModel, arms: Iterable, qpos: np.ndarray,
                    control_period: float, max_halvings: int = 8) -> float:
    """Largest control_period / 2**j (j <= max_halvings) passing every servo; warns (naming the
    joints and numbers) if even the smallest fails, and returns the smallest."""
    arms = list(arms)
    for j in range(max_halvings + 1):
        dt = control_period / 2**j
        if all(c.ok for c in servo_checks(model, arms, qpos, dt)):
            return dt
    warn_unstable(model, arms, qpos, dt)
    return dt


def warn_unstable(model: mujoco.MjModel, arms: Iterable, qpos: np.ndarray, dt: float) -> list[ServoCheck]:
    """Log a warning per servo that fails at dt; return the failing checks."""
    bad = [c for c in servo_checks(model, arms, qpos, dt) if not c.ok]
    for c in bad:
        log.warning("timestep %.6g s is too large for the servo of %s: omega*dt = %.3g > max(1, "
                    "zeta=%.3g) (omega %.1f rad/s, inertia %.4g)", dt, c.joint, c.omega_dt, c.zeta,
                    c.omega, c.inertia)
    return bad
