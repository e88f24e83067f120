"""Torque drive for an arm (MjSpec edits before compiling) and the arm's own dynamics model.

A torque-mode controller commands joint torques, as a real arm in torque (or motor MIT) mode.
The robot files give position servos; :func:`add_torque_drive` adds, per arm joint, a motor
actuator (``<joint>_torque``: gain 1, no bias, the servos' force range) and a
``jointactuatorfrc`` sensor (``<joint>_actfrc``: the torque the joint receives), and deals with
the servos:

- ``disable`` (default): the servos move to actuator group :data:`SERVO_GROUP`, which the model
  disables (``option.disableactuator``): exact under every integrator;
- ``full``: the servos stay and the controller nulls them every cycle
  (``ctrl = q + (kv/kp) qd`` zeroes ``kp (ctrl - q) - kv qd``); exact under Euler, but the
  implicit integrators still put kv in the implicit inertia (a warning says so).

:class:`OwnModel` is the controller's model of its arm: compiled from the arm's own robot file
alone (no scene, no other robot, no payload, no gravity compensation), so a feed-forward computed
on it never reads the simulation.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, ArmBinding

log = logging.getLogger(__name__)

SERVO_GROUP = 5   # the actuator group servos of torque-driven arms move to (disabled)
NULLINGS = ("disable", "full")


def add_torque_drive(spec: mujoco.MjSpec, model: mujoco.MjModel, arm: ArmBinding,
                     nulling: str = "disable") -> None:
    """Motors and torque sensors on every joint of ``arm`` (a compiled ``model`` of ``spec``
    names things); the servos disabled or left to be nulled.

    Raises:
        ConfigError: unknown nulling; a joint without a force range to give its motor.
    """
    if nulling not in NULLINGS:
        raise ConfigError(f"arm {arm.name!r}: nulling {nulling!r}; expected one of {list(NULLINGS)}")
    for k, joint in enumerate(arm.joint_names):
        jid = int(arm.joint_ids[k])
        servos = [a for a in arm.actuators[k] if a.kind is ActuatorKind.POSITION]
        lo, hi = force_range(model, jid, [a.id for a in arm.actuators[k]])
        for a in servos:
            if nulling == "disable":
                spec.actuators[a.id].group = SERVO_GROUP
        motor = spec.add_actuator(name=f"{joint}_torque", target=joint,
                                  trntype=mujoco.mjtTrn.mjTRN_JOINT)
        motor.set_to_motor()
        if np.isfinite(lo) and np.isfinite(hi):
            motor.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            motor.forcerange = [lo, hi]
        spec.add_sensor(name=f"{joint}_actfrc", type=mujoco.mjtSensor.mjSENS_JOINTACTFRC,
                        objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=joint)
    if nulling == "disable":
        spec.option.disableactuator |= 1 << SERVO_GROUP
    elif spec.option.integrator in (mujoco.mjtIntegrator.mjINT_IMPLICIT,
                                    mujoco.mjtIntegrator.mjINT_IMPLICITFAST):
        log.warning("arm %r: nulling 'full' under an implicit integrator: the servos' kv stays in "
                    "the implicit inertia (use nulling 'disable', or the Euler integrator, for an "
                    "exact torque drive)", arm.name)


def force_range(model: mujoco.MjModel, jid: int, actuators: list[int]) -> tuple[float, float]:
    """The joint's actuator force range, else the sum of its actuators' ranges, else +-inf."""
    if model.jnt_actfrclimited[jid]:
        return float(model.jnt_actfrcrange[jid, 0]), float(model.jnt_actfrcrange[jid, 1])
    if actuators and all(model.actuator_forcelimited[a] for a in actuators):
        gear = [abs(float(model.actuator_gear[a, 0])) for a in actuators]
        return (sum(float(model.actuator_forcerange[a, 0]) * g for a, g in zip(actuators, gear)),
                sum(float(model.actuator_forcerange[a, 1]) * g for a, g in zip(actuators, gear)))
    return -np.inf, np.inf


@dataclass
class OwnModel:
    """The arm's own dynamics: its robot file compiled alone. Physics thread only (one MjData).

    Attributes:
        model, data: the robot file's model (no gravity compensation) and the controller's data.
        qpos_adr, dof_adr: the arm's joints in it (J,), controller order.
        armature, damping, frictionloss: per joint (J,), what RNEA leaves out.
    """

    model: mujoco.MjModel
    data: mujoco.MjData
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    armature: np.ndarray
    damping: np.ndarray
    frictionloss: np.ndarray

    @classmethod
    def from_file(cls, path: str | Path, joint_names, prefix: str = "") -> "OwnModel":
        """Compile ``path`` alone and find ``joint_names`` (scene names: ``prefix`` + the
        file's names).

        Raises:
            ConfigError: a joint is not in the file.
        """
        spec = mujoco.MjSpec.from_file(str(path))
        for body in spec.bodies:
            body.gravcomp = 0.0
        with warnings.catch_warnings():  # the file's own attach warnings, as for the scene
            warnings.filterwarnings("ignore", message="Attach")
            model = spec.compile()
        ids = []
        for name in joint_names:
            local = name[len(prefix):] if prefix and name.startswith(prefix) else name
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, local)
            if jid < 0:
                raise ConfigError(f"torque controller: joint {name!r} is not in the arm's own "
                                  f"robot file {path} (as {local!r})")
            ids.append(jid)
        ids = np.array(ids)
        dofs = model.jnt_dofadr[ids]
        return cls(model, mujoco.MjData(model), model.jnt_qposadr[ids], dofs,
                   model.dof_armature[dofs].copy(), model.dof_damping[dofs].copy(),
                   model.dof_frictionloss[dofs].copy())

    def inverse_dynamics(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """RNEA on the own model: M(q) qdd + c(q, qd) for the arm's joints (J,), N m; armature,
        damping and friction excluded (RNEA does not know them)."""
        m, d = self.model, self.data
        d.qpos[self.qpos_adr] = q
        d.qvel[:] = 0.0
        d.qvel[self.dof_adr] = qd
        d.qacc[:] = 0.0
        d.qacc[self.dof_adr] = qdd
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_comVel(m, d)
        out = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 1, out)
        return out[self.dof_adr]
