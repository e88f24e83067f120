"""How far a geom can move when an arm's joints move: the lever arms of the between-state
certificate, from the model's kinematic tree (never from the order a configuration lists the
joints in).

For a point x of geom g and an arm joint j upstream of g in the tree:

- hinge j: x moves at |qdot_j| * |x - anchor_j| at most, and |x - anchor_j| <= rho(j, g) for
  every configuration, where rho sums the tree path from anchor_j down to g: each segment from
  an arm joint a to the next arm joint b below it is |anchor_b - anchor_a| at the reference pose
  (invariant when a is a hinge: b turns about an axis through anchor_a), plus the travel of a
  slide a over its range (a slide moves everything below it, but not its own anchor); the
  last segment ends at g's centre and adds g's bounding radius;
- slide j: x moves at |qdot_j| exactly: rho(j, g) = 1 (m per m).

So over an interval on which |qdot_j| <= vmax_j, every point of g travels at most
``sum_j rho(j, g) * vmax_j * h``. The arm's gripper joints (``gripper_joints``: held where
they are measured during a replay, anywhere in their range) are joints of the tree too: a
slide among them adds its travel to every segment it carries, and each has a column of its own
(the allowed-collision matrix's proofs vary them). Every other joint is held at the reference
pose. Ball and free joints are refused.
"""

from __future__ import annotations

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ArmBinding

_HINGE, _SLIDE = mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE


def reach_matrix(model: mujoco.MjModel, arm: ArmBinding, qpos: np.ndarray) -> np.ndarray:
    """rho, shape (ngeom, J + G): per geom of the model and joint of the arm (in the arm's
    joint order, then its G gripper joints), the bound above; 0 where the joint does not move
    the geom.

    Args:
        model: the model (only read).
        arm: the arm's binding.
        qpos: the reference pose (nq,); every joint that is not the arm's stays there.

    Raises:
        ConfigError: an arm joint is neither hinge nor slide, or a slide has no range.
    """
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    ids = [*arm.joint_ids, *arm.gripper.joint_ids]
    names = [*arm.joint_names, *arm.gripper.joint_names]
    col = {int(j): k for k, j in enumerate(ids)}
    travel = np.zeros(len(ids))   # how far a slide can take its children (m)
    for k, j in enumerate(ids):
        jtype = model.jnt_type[j]
        if jtype == _SLIDE:
            if not model.jnt_limited[j]:
                raise ConfigError(f"arm {arm.name!r}: slide joint {names[k]!r} has no "
                                  "range; the between-state certificate needs one to bound its travel")
            lo, hi = model.jnt_range[j]
            q = qpos[model.jnt_qposadr[j]]
            travel[k] = max(abs(hi - q), abs(q - lo))
        elif jtype != _HINGE:
            raise ConfigError(f"arm {arm.name!r}: joint {names[k]!r} is a "
                              f"{mujoco.mjtJoint(jtype).name}; the replay checker supports hinge "
                              "and slide joints")
    rho = np.zeros((model.ngeom, len(ids)))
    for g in range(model.ngeom):
        path = _arm_joints_above(model, int(model.geom_bodyid[g]), col)  # nearest first
        if not path:
            continue
        # distance from each path joint's anchor down to the geom, bounded over configurations
        reach = np.linalg.norm(data.geom_xpos[g] - data.xanchor[path[0]]) + model.geom_rbound[g] \
            + travel[col[path[0]]]
        for i, j in enumerate(path):
            if i > 0:
                below = path[i - 1]
                reach += np.linalg.norm(data.xanchor[below] - data.xanchor[j]) + travel[col[j]]
            k = col[j]
            rho[g, k] = 1.0 if model.jnt_type[j] == _SLIDE else reach
    return rho


def _arm_joints_above(model: mujoco.MjModel, body: int, col: dict[int, int]) -> list[int]:
    """The arm's joints that move ``body``, from the nearest up to the root. Joints of one body
    act in the order the model lists them: the later one is nearer to the body's children."""
    out = []
    while body > 0:
        first, n = model.body_jntadr[body], model.body_jntnum[body]
        out.extend(j for j in range(first + n - 1, first - 1, -1) if j in col)
        body = int(model.body_parentid[body])
    return out
