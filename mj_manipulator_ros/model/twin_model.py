"""The twin-owned model variant (MjSpec edits) and the exchange-rate stability pre-check.

Under co-simulation with an actuator twin (``sim/cosim.py``) the twin integrates every arm
joint; MuJoCo only computes the load. So the model must not model what the twin does:
:func:`make_twin_owned` records, per arm joint, what the file gave (armature, drivetrain friction,
force range, the position servo's gains: the twin's and the MIT controller's defaults), then
removes from the model the armature, the joint friction (``frictionloss``), every actuator and
every gravity compensation, and welds the joints inside the arms' subtrees that no arm owns (the
fingers: their joints, equalities and sensors deleted). Link inertia, link damping, springs,
contacts, constraints and gravity stay. A joint outside the arms (a free object, another robot)
would be a coordinate left for MuJoCo to integrate: refused. The exchange and its stability
pre-check: ``model/exchange.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, ArmBinding
from mj_manipulator_ros.model.torque_drive import force_range


@dataclass(frozen=True)
class TwinJoints:
    """What the robot file gave an arm's joints before the twin took them, each (J,).

    Attributes:
        armature: kg m^2 (the rotor and gearbox inertia: the twin's default J).
        frictionloss: N m (drivetrain Coulomb friction: the twin's default).
        torque_limit: N m (the joint's actuator force range, or its servos': +inf if none).
        kp, kv: the joint's position servo gains, N m/rad and N m s/rad (0 without a servo):
            the MIT controller's default gains.
    """

    armature: np.ndarray
    frictionloss: np.ndarray
    torque_limit: np.ndarray
    kp: np.ndarray
    kv: np.ndarray


def make_twin_owned(spec: mujoco.MjSpec, model: mujoco.MjModel,
                    arms: Mapping[str, ArmBinding]) -> dict[str, TwinJoints]:
    """Edit ``spec`` (``model`` its compiled form, arms bound on it) into the twin-owned variant.

    Returns:
        arm name -> what its joints had (see :class:`TwinJoints`).

    Raises:
        ConfigError: a joint that is neither an arm's nor inside an arm's subtree (MuJoCo would
            have to integrate it), or a tendon through a welded joint.
    """
    owned = {int(j) for a in arms.values() for j in a.joint_ids}
    roots = {int(model.jnt_bodyid[j]) for j in owned}
    weld, refuse = [], []
    for j in range(model.njnt):
        if j in owned:
            continue
        body = int(model.jnt_bodyid[j])
        while body not in roots and body != 0:
            body = int(model.body_parentid[body])
        (weld if body in roots else refuse).append(model.joint(j).name)
    if refuse:
        raise ConfigError(
            f"sim.physics cosim: joint(s) {refuse} are outside every arm: MuJoCo would have to "
            f"integrate them next to the twin; the co-simulation takes fixed-base arms only (arm "
            f"joints: {sorted(model.joint(j).name for j in owned)})")
    out = {}
    for name, arm in arms.items():
        fields = {k: [] for k in ("armature", "frictionloss", "torque_limit", "kp", "kv")}
        for k, jid in enumerate(arm.joint_ids):
            dof = int(model.jnt_dofadr[jid])
            lo, hi = force_range(model, int(jid), [a.id for a in arm.actuators[k]])
            servo = next((a for a in arm.actuators[k] if a.kind is ActuatorKind.POSITION), None)
            fields["armature"].append(float(model.dof_armature[dof]))
            fields["frictionloss"].append(float(model.dof_frictionloss[dof]))
            fields["torque_limit"].append(float(max(abs(lo), abs(hi))))
            fields["kp"].append(servo.kp if servo else 0.0)
            fields["kv"].append(servo.kv if servo else 0.0)
            joint = spec.joint(model.joint(int(jid)).name)
            joint.armature = 0.0
            joint.frictionloss = 0.0
            joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE
            joint.actgravcomp = False
        out[name] = TwinJoints(**{k: np.array(v) for k, v in fields.items()})
    welded = set(weld)
    for tendon in spec.tendons:
        if any(getattr(w, "target", None) in welded for w in getattr(tendon, "path", [])):
            raise ConfigError(f"sim.physics cosim: tendon {tendon.name!r} runs through a welded "
                              "joint")
    for eq in list(spec.equalities):
        if eq.type == mujoco.mjtEq.mjEQ_JOINT and (eq.name1 in welded or eq.name2 in welded):
            spec.delete(eq)
    for sensor in list(spec.sensors):
        if sensor.objtype == mujoco.mjtObj.mjOBJ_JOINT and sensor.objname in welded:
            spec.delete(sensor)
        elif sensor.objtype == mujoco.mjtObj.mjOBJ_ACTUATOR:
            spec.delete(sensor)
    for actuator in list(spec.actuators):
        spec.delete(actuator)
    for name in weld:
        spec.delete(spec.joint(name))
    for body in spec.bodies:
        body.gravcomp = 0.0
    return out


def check_twin_owned(model: mujoco.MjModel, arms: Mapping[str, ArmBinding]) -> None:
    """Every degree of freedom belongs to an arm joint, and nothing drives or pads them.

    Raises:
        ConfigError: naming the first coordinate left to MuJoCo, or what was not removed.
    """
    owned = {int(d) for a in arms.values() for d in a.dof_adr}
    left = [model.joint(int(model.dof_jntid[d])).name for d in range(model.nv) if d not in owned]
    if left:
        raise ConfigError(f"sim.physics cosim: coordinate(s) of joint(s) {sorted(set(left))} "
                          "are left for MuJoCo to integrate; every coordinate must be the twin's")
    dofs = sorted(owned)
    for what, values in (("armature", model.dof_armature[dofs]),
                         ("frictionloss", model.dof_frictionloss[dofs])):
        if np.any(values != 0):
            raise ConfigError(f"sim.physics cosim: twin-owned joints keep {what} {values.tolist()}"
                              "; the twin models it")
    if model.nu:
        raise ConfigError(f"sim.physics cosim: the twin-owned model keeps {model.nu} actuator(s)")
