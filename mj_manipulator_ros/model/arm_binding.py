"""An arm's joints, actuators and bodies resolved to MuJoCo model indices, once.

Used by the simulated controllers (to drive the arm), the timestep checks and the replay checker
(to pose the arm and to attribute contacts to it). The binding reports what drives each joint
and of which kind; it does not insist on any: a position controller asks for
:meth:`ArmBinding.position_servos`, a torque controller for something else.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import ArmConfig
from mj_manipulator_ros.core.errors import ConfigError


class ActuatorKind(str, enum.Enum):
    """What a joint actuator is, read from its gain and bias types."""

    POSITION = "position"   # gain fixed, bias affine with biasprm[1] = -kp: a P(D) servo
    VELOCITY = "velocity"   # gain fixed, bias affine with biasprm[1] = 0, biasprm[2] = -kv
    MOTOR = "motor"         # gain fixed, no bias: force = gear * ctrl
    OTHER = "other"


@dataclass(frozen=True)
class JointActuator:
    """One actuator acting on one joint.

    Attributes:
        id: actuator index.
        kind: see :class:`ActuatorKind`.
        kp: stiffness, N m/rad (N/m); 0 unless a position servo.
        kv: damping, N m s/rad (N s/m); ``-biasprm[2]``.
        group: the actuator's group (MuJoCo can disable groups).
    """

    id: int
    kind: ActuatorKind
    kp: float
    kv: float
    group: int


@dataclass(frozen=True)
class PositionServos:
    """One position servo per joint of an arm, shape (J,) each: actuator ids, kp, kv."""

    actuator_ids: np.ndarray
    kp: np.ndarray
    kv: np.ndarray


@dataclass(frozen=True)
class ArmBinding:
    """One arm's indices into the model. Arrays have shape (J,), in the arm's joint order.

    Attributes:
        joint_ids, qpos_adr, dof_adr: model indices.
        actuators: per joint, every actuator whose transmission is that joint.
        lower, upper: joint range (rad or m); +-inf for an unlimited joint.
        body_ids: every body moved by the arm's joints (for collision attribution).
        gripper: the joints the arm carries that plans do not command (``gripper_joints``).
    """

    name: str
    joint_names: tuple[str, ...]
    joint_ids: np.ndarray
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    actuators: tuple[tuple[JointActuator, ...], ...]
    lower: np.ndarray
    upper: np.ndarray
    body_ids: frozenset
    gripper: "GripperBinding"

    def position_servos(self) -> PositionServos:
        """The position servo of every joint.

        Raises:
            ConfigError: a joint has no position servo, or more than one.
        """
        ids = []
        for joint, acts in zip(self.joint_names, self.actuators):
            servos = [a for a in acts if a.kind is ActuatorKind.POSITION]
            if len(servos) != 1:
                kinds = [f"{a.id}:{a.kind.value}" for a in acts]
                raise ConfigError(f"arm {self.name!r}: joint {joint!r} needs exactly one position "
                                  f"servo actuator, found {len(servos)} (its actuators: "
                                  f"{kinds or 'none'})")
            ids.append(servos[0])
        return PositionServos(np.array([a.id for a in ids], dtype=int),
                              np.array([a.kp for a in ids]), np.array([a.kv for a in ids]))


@dataclass(frozen=True)
class GripperBinding:
    """The joints an arm carries that plans do not command (a gripper's fingers), shape (G,):
    every check holds them where they are measured; the allowed-collision matrix proves its
    pairs over their whole range.

    Attributes:
        joint_names: model names, in the configuration's order.
        joint_ids, qpos_adr, dof_adr: model indices.
        lower, upper: joint range (rad or m); every gripper joint is limited.
    """

    joint_names: tuple[str, ...]
    joint_ids: np.ndarray
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def _bind_gripper(model: mujoco.MjModel, arm: ArmConfig, bodies: set) -> GripperBinding:
    """The arm's ``gripper_joints`` resolved: hinge or slide, limited, on the arm.

    Raises:
        ConfigError: a joint is not in the model, not hinge or slide, unlimited, or does not
            ride on the arm (its body is not moved by the arm's joints).
    """
    ids = []
    for joint in arm.gripper_joints:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        where = f"arm {arm.name!r}: gripper joint {joint!r}"
        if jid < 0:
            raise ConfigError(f"{where} is not in the scene model")
        kind = mujoco.mjtJoint(model.jnt_type[jid])
        if kind not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            raise ConfigError(f"{where} is a {kind.name}; expected a hinge or slide joint")
        if not model.jnt_limited[jid]:
            raise ConfigError(f"{where} has no range in the model; the checks need its range "
                              "(the allowed-collision matrix proves its pairs over it)")
        if int(model.jnt_bodyid[jid]) not in bodies:
            raise ConfigError(f"{where} moves body {model.body(int(model.jnt_bodyid[jid])).name!r}"
                              f", which the arm's joints {list(arm.joint_names)} do not carry")
        ids.append(jid)
    ids_a = np.array(ids, dtype=int)
    return GripperBinding(tuple(arm.gripper_joints), ids_a, model.jnt_qposadr[ids_a],
                          model.jnt_dofadr[ids_a],
                          model.jnt_range[ids_a, 0].copy(), model.jnt_range[ids_a, 1].copy())


def bind_arm(model: mujoco.MjModel, arm: ArmConfig) -> ArmBinding:
    """Resolve an arm's joints, their actuators and the bodies they move.

    Raises:
        ConfigError: a joint is not in the model (the message lists similar names and every
            joint of the model).
    """
    all_joints = [model.joint(i).name for i in range(model.njnt)]
    ids = []
    for joint in arm.joint_names:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if jid < 0:
            near = [j for j in all_joints if joint.split("/")[-1][-6:] in j][:6]
            raise ConfigError(f"arm {arm.name!r}: joint {joint!r} is not in the scene model"
                              f"{'; similar: ' + str(near) if near else ''}; the model has "
                              f"{len(all_joints)} joints: {all_joints}")
        ids.append(jid)
    ids_a = np.array(ids, dtype=int)
    actuators = tuple(tuple(joint_actuator(model, a) for a in range(model.nu)
                            if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                            and model.actuator_trnid[a, 0] == jid) for jid in ids)
    limited = model.jnt_limited[ids_a].astype(bool)
    lower = np.where(limited, model.jnt_range[ids_a, 0], -np.inf)
    upper = np.where(limited, model.jnt_range[ids_a, 1], np.inf)
    dofs = model.jnt_dofadr[ids_a]
    bodies = {b for b in range(model.nbody) if any(_moves(model, b, d) for d in dofs)}
    return ArmBinding(arm.name, arm.joint_names, ids_a, model.jnt_qposadr[ids_a], dofs, actuators,
                      lower, upper, frozenset(bodies), _bind_gripper(model, arm, bodies))


def joint_actuator(model: mujoco.MjModel, a: int) -> JointActuator:
    """Actuator ``a`` (whose transmission is a joint) with its kind, kp, kv and group."""
    gain_fixed = model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
    bias = model.actuator_biastype[a]
    kp = float(model.actuator_gainprm[a, 0])
    b1, b2 = float(model.actuator_biasprm[a, 1]), float(model.actuator_biasprm[a, 2])
    kind = ActuatorKind.OTHER
    if gain_fixed and bias == mujoco.mjtBias.mjBIAS_AFFINE:
        if np.isclose(b1, -kp) and kp > 0:
            kind = ActuatorKind.POSITION
        elif b1 == 0.0 and b2 < 0.0:
            kind = ActuatorKind.VELOCITY
    elif gain_fixed and bias == mujoco.mjtBias.mjBIAS_NONE:
        kind = ActuatorKind.MOTOR
    return JointActuator(a, kind, kp if kind is ActuatorKind.POSITION else 0.0, -b2,
                         int(model.actuator_group[a]))


def _moves(model: mujoco.MjModel, body: int, dof: int) -> bool:
    """Does dof move body (is the dof's body the body or one of its ancestors)?"""
    target = model.dof_bodyid[dof]
    while body > 0:
        if body == target:
            return True
        body = model.body_parentid[body]
    return False
