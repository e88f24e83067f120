"""Where one body of the model is, for many configurations of some of its joints at once.

``mj_kinematics`` places every body of the model for one configuration; the stop envelope
(``check/stop_envelope.py``) needs the hands' path along a whole plan, one configuration every
2 ms (7,000 for a 14 s plan), and one call per configuration from Python costs more than the
rest of the computation. :class:`ChainKinematics` computes the same poses for the chain from
the world to the body, for M configurations together, with MuJoCo's own composition (a body's
frame: its parent's, then its offset; a joint: a rotation about its axis through its anchor,
or a shift along it), every other joint of the model at ``qpos0``. ``test_chain_kinematics.py``
compares it with ``mj_kinematics`` on random configurations.

Shapes: M configurations, J the joints given.
"""

from __future__ import annotations

from typing import Sequence

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 4) unit quaternions (w, x, y, z) -> (..., 3, 3) rotation matrices."""
    w, x, y, z = np.moveaxis(np.asarray(q, dtype=float), -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def _rotated(r: np.ndarray, axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """(M, 3, 3) each frame of ``r`` (M, 3, 3) turned by ``angle`` (M,) rad about the unit
    ``axis`` (3,) of its own frame: r (I + sin K + (1 - cos) K^2) (Rodrigues, K the axis's
    cross-product matrix), the products with the constant K as one matrix product each."""
    m = r.shape[0]
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]],
                  [-axis[1], axis[0], 0.0]])
    rk = r.reshape(-1, 3) @ k
    rkk = (rk @ k).reshape(m, 3, 3)
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return r + s * rk.reshape(m, 3, 3) + (1.0 - c) * rkk


def chain_qpos_adr(model: mujoco.MjModel, body: int) -> frozenset[int]:
    """The qpos addresses of every joint on the chain from the world to ``body``."""
    out, b = set(), int(body)
    while b > 0:
        first = int(model.body_jntadr[b])
        out.update(int(model.jnt_qposadr[j]) for j in range(first,
                                                              first + int(model.body_jntnum[b])))
        b = int(model.body_parentid[b])
    return frozenset(out)


class ChainKinematics:
    """The world position of ``body`` as a function of the joints ``qpos_adr`` (J,).

    The chain's names and offsets are read once here; :meth:`positions` composes them.

    Raises:
        ConfigError: one of the joints given is not a hinge or a slide (one number each), or
            not on the chain from the world to ``body`` (it would not move it: a mistake).
    """

    def __init__(self, model: mujoco.MjModel, body: int, qpos_adr: Sequence[int]) -> None:
        self.body = int(body)
        adr = [int(a) for a in qpos_adr]
        chain = []
        b = self.body
        while b > 0:
            chain.append(b)
            b = int(model.body_parentid[b])
        chain.reverse()
        self._steps: list[tuple] = []   # ("body", pos, R) or ("joint", kind, axis, pos, column)
        found = set()
        for b in chain:
            self._steps.append(("body", model.body_pos[b].copy(),
                                _quat_matrix(model.body_quat[b])))
            for j in range(int(model.body_jntadr[b]),
                           int(model.body_jntadr[b]) + int(model.body_jntnum[b])):
                kind = int(model.jnt_type[j])
                a = int(model.jnt_qposadr[j])
                column = adr.index(a) if a in adr else None
                name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) or str(j)
                if column is not None and kind not in (mujoco.mjtJoint.mjJNT_HINGE,
                                                       mujoco.mjtJoint.mjJNT_SLIDE):
                    raise ConfigError(f"joint {name!r}: a chain's joints must be hinges or "
                                      f"slides (one position each), this one is of type {kind}")
                if column is not None:
                    found.add(a)
                self._steps.append(("joint", kind, model.jnt_axis[j].copy(),
                                    model.jnt_pos[j].copy(), column,
                                    model.qpos0[a:a + (7 if kind == 0 else 4 if kind == 1
                                                       else 1)].copy()))
        missing = [a for a in adr if a not in found]
        if missing:
            body_name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, self.body)
            raise ConfigError(f"qpos addresses {missing} are not joints on the chain from the "
                              f"world to body {body_name!r}: they cannot move it")

    def positions(self, q: np.ndarray) -> np.ndarray:
        """(M, 3) the body's world position (m) for each row of ``q`` (M, J): the joints'
        positions in the order given at construction, every other joint at ``qpos0``."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        m = q.shape[0]
        p = np.zeros((m, 3))
        r = np.broadcast_to(np.eye(3), (m, 3, 3))
        for step in self._steps:
            if step[0] == "body":
                _, pos, rot = step
                p = p + _turn(r, pos)
                r = (r.reshape(-1, 3) @ rot).reshape(m, 3, 3)
                continue
            _, kind, axis, jpos, column, q0 = step
            if kind == mujoco.mjtJoint.mjJNT_FREE:   # the body placed in the world
                p = np.broadcast_to(q0[:3], (m, 3)).copy()
                r = np.broadcast_to(_quat_matrix(q0[3:7]), (m, 3, 3))
                continue
            if kind == mujoco.mjtJoint.mjJNT_SLIDE:
                if column is not None:   # (at qpos0 a slide has not moved)
                    p = p + _turn(r, axis) * (q[:, column] - q0[0])[:, None]
                continue
            anchor = p + _turn(r, jpos)
            if kind == mujoco.mjtJoint.mjJNT_BALL:
                r = (r.reshape(-1, 3) @ _quat_matrix(q0)).reshape(m, 3, 3)
            elif column is not None:
                r = _rotated(r, axis, q[:, column] - q0[0])
            else:
                continue   # a hinge at qpos0: no rotation
            p = anchor - _turn(r, jpos)
        return p


def _turn(r: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(M, 3) each rotation of ``r`` (M, 3, 3) applied to the vector ``v`` (3,)."""
    return (r.reshape(-1, 3) @ v).reshape(-1, 3)
