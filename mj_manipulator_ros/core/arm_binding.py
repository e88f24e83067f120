"""An arm's joints, servos and bodies resolved to MuJoCo model indices, once.

Used by the simulator (to drive the arm) and the replay checker (to pose it and to attribute
contacts to arms). Pure MuJoCo/numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import ArmConfig
from mj_manipulator_ros.core.errors import ConfigError


@dataclass(frozen=True)
class ArmBinding:
    """One arm's indices into the model. Arrays have shape (J,), in the arm's joint order.

    Attributes:
        joint_ids, qpos_adr, dof_adr, actuator_ids: model indices.
        kp, kv: servo stiffness (N m/rad) and damping (N m s/rad) of each joint's actuator.
        lower, upper: joint range (rad or m); +-inf for an unlimited joint.
        body_ids: every body moved by the arm's joints (for collision attribution).
    """

    name: str
    joint_names: tuple[str, ...]
    joint_ids: np.ndarray
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    actuator_ids: np.ndarray
    kp: np.ndarray
    kv: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    body_ids: frozenset


def bind_arm(model: mujoco.MjModel, arm: ArmConfig) -> ArmBinding:
    """Resolve an arm's joints and their position servos in the model.

    Raises:
        ConfigError: a joint is missing, or has no (or more than one) position servo.
    """
    all_joints = [model.joint(i).name for i in range(model.njnt)]
    ids, acts = [], []
    for joint in arm.joint_names:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if jid < 0:
            near = [j for j in all_joints if joint.split("/")[-1][-6:] in j][:6]
            raise ConfigError(f"arm {arm.name!r}: joint {joint!r} is not in the scene model"
                              f"{'; similar: ' + str(near) if near else ''}; the model has "
                              f"{len(all_joints)} joints: {all_joints}")
        servos = [a for a in range(model.nu)
                  if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                  and model.actuator_trnid[a, 0] == jid]
        servos = [a for a in servos if _is_position_servo(model, a)]
        if len(servos) != 1:
            raise ConfigError(f"arm {arm.name!r}: joint {joint!r} needs exactly one position servo "
                              f"actuator, found {len(servos)}")
        ids.append(jid)
        acts.append(servos[0])
    ids_a, acts_a = np.array(ids), np.array(acts)
    limited = model.jnt_limited[ids_a].astype(bool)
    lower = np.where(limited, model.jnt_range[ids_a, 0], -np.inf)
    upper = np.where(limited, model.jnt_range[ids_a, 1], np.inf)
    dofs = model.jnt_dofadr[ids_a]
    bodies = set()
    for b in range(model.nbody):
        if any(_moves(model, b, d) for d in dofs):
            bodies.add(b)
    return ArmBinding(arm.name, arm.joint_names, ids_a, model.jnt_qposadr[ids_a], dofs, acts_a,
                      model.actuator_gainprm[acts_a, 0].copy(), -model.actuator_biasprm[acts_a, 2],
                      lower, upper, frozenset(bodies))


def _moves(model: mujoco.MjModel, body: int, dof: int) -> bool:
    """Does dof move body (is the dof's body the body or one of its ancestors)?"""
    target = model.dof_bodyid[dof]
    while body > 0:
        if body == target:
            return True
        body = model.body_parentid[body]
    return False


def _is_position_servo(model: mujoco.MjModel, a: int) -> bool:
    return (model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
            and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
            and np.isclose(model.actuator_biasprm[a, 1], -model.actuator_gainprm[a, 0]))
