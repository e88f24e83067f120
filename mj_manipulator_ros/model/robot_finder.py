"""The arms and grippers of a robot model, found from its actuated kinematic chains.

A new robot comes as an MJCF; its configuration needs the arms (their joints, in chain order),
the grippers, a ready pose and whether the model brings its own ground. Read from the compiled
model, each decision with its reason:

- **arms**: the joints with an actuator of their own (a joint transmission), grouped by the
  top-level body (a child of the world) they hang from; free and ball joints never.
- **arm joints vs. gripper joints**: within a group, a driven joint is the arm's when every
  other joint under its top-level body (driven or not: a finger coupled to its driven twin
  counts) lies on its own line of descent (an ancestor or a descendant of its body); the
  driven joints of sibling branches (two fingers) are the gripper's, and so is a slide joint
  after the last hinge (a one-finger gripper).
- **names**: an arm is named by the words of its top-level body's name the other arms' do
  not share (``vx300s_left``, ``vx300s_right`` -> ``left``, ``right``); a joint's driver
  name is its name without the prefix every joint of its arm shares (``vx300s_left/waist`` ->
  ``waist``).
- **ready pose**: the model's first keyframe, else its reference pose (``qpos0``).
- **its own ground**: a plane, or a world-fixed geom whose top lies within ``GROUND_TOL_M`` of
  z = 0 (a tabletop at the origin): the scene's added floor would fight it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, joint_actuator
from mj_manipulator_ros.model.collidable import active_geoms

#: a world-fixed geom whose top is within this of z = 0 counts as the model's own ground, m
GROUND_TOL_M = 0.005


@dataclass(frozen=True)
class FoundArm:
    """One arm of a model.

    Attributes:
        name: the arm's name (for plans and reports).
        root_body: the top-level body it hangs from.
        joints: its arm joints, base outward (model names).
        driver_names: the joints' names without the prefix they share (same order).
        gripper_joints: actuated joints of its gripper (model names).
        gripper_driver_names: the gripper joints' names without that prefix (same order).
        ready: the ready pose of ``joints`` (rad or m), (J,).
        gripper_ready: the ready pose of ``gripper_joints``.
        lower, upper: the joints' ranges (rad or m; +-inf unlimited), (J,).
        without_servo: the arm joints without exactly one position servo (model names): the
            simulator's position controller cannot drive them; its torque controller, which
            adds a torque drive of its own, can.
    """

    name: str
    root_body: str
    joints: tuple[str, ...]
    driver_names: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    gripper_driver_names: tuple[str, ...]
    ready: tuple[float, ...]
    gripper_ready: tuple[float, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    without_servo: tuple[str, ...] = ()

    @property
    def controller(self) -> str:
        """The simulated controller kind that can drive this arm (``sim.arms.<arm>.controller``):
        "position" where every joint has its position servo, else "torque"."""
        return "torque" if self.without_servo else "position"


@dataclass(frozen=True)
class FoundRobot:
    """What :func:`find_robot` found: the arms, whether the model has its own ground, and
    one line per decision (``why``)."""

    arms: tuple[FoundArm, ...]
    own_ground: str          # what counts as its ground; "" when none
    ready_from: str          # "keyframe 'name'" or "qpos0"
    why: tuple[str, ...]


def find_robot(path: str | os.PathLike) -> FoundRobot:
    """Read the MJCF at ``path`` and find its arms (module docstring).

    Raises:
        ConfigError: the file does not compile, or no joint has an actuator of its own.
    """
    path = Path(path)
    try:
        model = mujoco.MjModel.from_xml_path(str(path))
    except Exception as exc:  # noqa: BLE001 - MuJoCo raises ValueError with its own text
        raise ConfigError(f"{path}: does not compile as MJCF: {exc}") from None
    why: list[str] = []
    driven = _driven_joints(model)
    if not driven:
        raise ConfigError(f"{path}: no joint has an actuator of its own (joint transmission): "
                          "no arm to find")
    groups: dict[int, list[int]] = {}
    for j in driven:
        groups.setdefault(int(model.body_rootid[model.jnt_bodyid[j]]), []).append(j)
    roots = sorted(groups)
    names = _arm_names([_name(model, mujoco.mjtObj.mjOBJ_BODY, r) for r in roots])
    qpos, ready_from = _ready(model)
    arms = []
    for root, arm_name in zip(roots, names):
        joints = sorted(groups[root])
        arm, gripper = _split(model, joints)
        if not arm:
            why.append(f"body {_name(model, mujoco.mjtObj.mjOBJ_BODY, root)!r}: actuated joints "
                       f"{[_name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joints]} but none "
                       "on one chain: not an arm")
            continue
        arm_names = [_name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in arm]
        grip_names = [_name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in gripper]
        prefix = os.path.commonprefix(arm_names + grip_names)
        prefix = prefix if all(len(n) > len(prefix) for n in arm_names) else ""
        drivers = tuple(n[len(prefix):] for n in arm_names)
        grip_drivers = tuple(n[len(prefix):] or n for n in grip_names)
        limited = model.jnt_limited[arm].astype(bool)
        lower = np.where(limited, model.jnt_range[arm, 0], -np.inf)
        upper = np.where(limited, model.jnt_range[arm, 1], np.inf)
        arms.append(FoundArm(arm_name, _name(model, mujoco.mjtObj.mjOBJ_BODY, root),
                             tuple(arm_names), drivers, tuple(grip_names), grip_drivers,
                             tuple(float(qpos[model.jnt_qposadr[j]]) for j in arm),
                             tuple(float(qpos[model.jnt_qposadr[j]]) for j in gripper),
                             tuple(map(float, lower)), tuple(map(float, upper)),
                             tuple(n for j, n in zip(arm, arm_names) if _servos(model, j) != 1)))
        why.append(f"arm {arm_name!r}: the {len(arm)} actuated joints on one chain under body "
                   f"{arms[-1].root_body!r} ({', '.join(arm_names)})"
                   + (f"; gripper: {', '.join(grip_names)} (sibling branches or slides after "
                      "the last hinge)" if grip_names else "; no gripper joints"))
        lacking = arms[-1].without_servo
        why.append(f"arm {arm_name!r}: simulated with the {arms[-1].controller} controller ("
                   + ("every joint has its position servo)" if not lacking else
                      f"{', '.join(lacking)} without exactly one position servo: the simulator "
                      "drives the arm through a torque drive of its own)"))
    if not arms:
        raise ConfigError(f"{path}: no actuated chain found; " + "; ".join(why))
    ground = _own_ground(model)
    why.append(f"its own ground: {ground} (the scene adds no floor)" if ground else
               "no ground of its own: the scene adds a floor at z = 0")
    why.append(f"ready pose: {ready_from}")
    return FoundRobot(tuple(arms), ground, ready_from, tuple(why))


def _name(model, kind, index: int) -> str:
    return mujoco.mj_id2name(model, kind, index) or f"<{kind.name[6:].lower()} {index}>"


def _driven_joints(model) -> list[int]:
    free_or_ball = (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL)
    out = set()
    for a in range(model.nu):
        if int(model.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT:
            j = int(model.actuator_trnid[a, 0])
            if int(model.jnt_type[j]) not in free_or_ball:
                out.add(j)
    return sorted(out)


def _servos(model, joint: int) -> int:
    """How many position servos act on ``joint`` alone."""
    return sum(1 for a in range(model.nu)
               if int(model.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT
               and int(model.actuator_trnid[a, 0]) == joint
               and joint_actuator(model, a).kind is ActuatorKind.POSITION)


def _ancestors(model, body: int) -> set[int]:
    out = set()
    while body != 0:
        out.add(body)
        body = int(model.body_parentid[body])
    return out


def _split(model, joints: list[int]) -> tuple[list[int], list[int]]:
    """(arm joints, gripper joints) of one group, arm joints base outward. Every joint under
    the group's top-level body counts for the branches, driven or not (a finger coupled to
    its driven twin by an equality is a branch too)."""
    root = int(model.body_rootid[model.jnt_bodyid[joints[0]]])
    free_or_ball = (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL)
    every = [j for j in range(model.njnt) if int(model.jnt_type[j]) not in free_or_ball
             and int(model.body_rootid[model.jnt_bodyid[j]]) == root]
    bodies = {j: int(model.jnt_bodyid[j]) for j in every}
    line = {j: _ancestors(model, bodies[j]) for j in every}
    chain = [j for j in joints
             if all(bodies[j] in line[k] or bodies[k] in line[j] for k in every)]
    chain.sort(key=lambda j: len(line[j]))
    hinge = [j for j in chain if int(model.jnt_type[j]) == mujoco.mjtJoint.mjJNT_HINGE]
    if hinge:   # slides after the last hinge: a one-finger gripper
        last = chain.index(hinge[-1])
        chain = chain[:last + 1]
    gripper = [j for j in joints if j not in chain]
    return chain, gripper


def _arm_names(roots: list[str]) -> list[str]:
    """What each root name does not share with the others, made a plain identifier."""
    if len(roots) == 1:
        names = roots
    else:   # whole words (split at _ / . - and spaces) shared by every root are dropped
        words = [re.split(r"[_/.\- ]+", r) for r in roots]
        lead = 0
        while all(len(w) > lead + 1 for w in words) and len({w[lead] for w in words}) == 1:
            lead += 1
        trail = 0
        while all(len(w) > lead + trail + 1 for w in words) and \
                len({w[-1 - trail] for w in words}) == 1:
            trail += 1
        names = ["_".join(w[lead:len(w) - trail]) for w in words]
    out = []
    for k, n in enumerate(names):
        n = re.sub(r"[^0-9a-zA-Z_]+", "_", n).strip("_").lower() or f"arm{k}"
        out.append(n if n not in out else f"{n}_{k}")
    return out


def _ready(model) -> tuple[np.ndarray, str]:
    if model.nkey > 0:
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_KEY, 0) or "0"
        return np.array(model.key_qpos[0]), f"keyframe {name!r}"
    return np.array(model.qpos0), "the model's reference pose (qpos0; it has no keyframe)"


def _own_ground(model) -> str:
    """A plane, or a world-fixed geom with its top at z = 0 (within GROUND_TOL_M): its name."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    for g in range(model.ngeom):
        if int(model.geom_type[g]) == mujoco.mjtGeom.mjGEOM_PLANE:
            return f"plane {_name(model, mujoco.mjtObj.mjOBJ_GEOM, g)!r}"
    active = active_geoms(model)
    for g in range(model.ngeom):
        body = int(model.geom_bodyid[g])
        if body != 0 and model.body_weldid[body] != 0:
            continue   # moves with some joint
        if not active[g]:
            continue
        centre, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
        rot = data.geom_xmat[g].reshape(3, 3)
        top = data.geom_xpos[g][2] + float(np.abs(rot[2]) @ half) + float(rot[2] @ centre)
        if abs(top) <= GROUND_TOL_M:
            return (f"geom {_name(model, mujoco.mjtObj.mjOBJ_GEOM, g)!r} (its top at z = "
                    f"{top * 1e3:+.1f} mm)")
    return ""
