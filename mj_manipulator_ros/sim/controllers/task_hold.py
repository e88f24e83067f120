"""A task-space hold through constrained dynamics, bridged to joint torques by RNEA.

Gauss's principle of least constraint: the joint accelerations closest, in the metric of the
inertia, to the unconstrained ones that satisfy the task's acceleration constraints,

    min_qdd 1/2 (qdd - qdd0)' M (qdd - qdd0)   s.t.   J qdd + Jdot qd = xdd_des

(J: rows of the TCP's 6-D Jacobian for the constrained axes, any subset of linear x y z and
angular x y z; e.g. leave linear z free for a supported slide), solved in closed form:

    qdd = qdd0 + M^-1 J' (J M^-1 J')^-1 (xdd_des - Jdot qd - J qdd0)

with xdd_des = Kp (x_ref - x) - Kd xd per constrained axis and qdd0 = -Kd_null qd (the free
motions damped). The torque command is then the inverse dynamics of that motion,

    tau = RNEA(q, qd, qdd) + armature qdd + damping qd        (the "RNEA bridge")

and not the constraint torque alone, M (qdd - qdd0) = J' lambda, which leaves gravity and the
velocity terms out. Everything is computed on the arm's own model (:class:`OwnModel`).
"""

from __future__ import annotations

from typing import Sequence

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.torque_drive import OwnModel

AXES = ("x", "y", "z", "rx", "ry", "rz")


class TaskSpaceHold:
    """Args:
        own: the arm's own model.
        site: the TCP site of the own model.
        axes: the constrained axes (names of :data:`AXES`).
        bandwidth_hz: the task-space PD's bandwidth (Kp = omega^2, Kd = 2 omega).
        null_damping: Kd of the free motions, 1/s.
    """

    def __init__(self, own: OwnModel, site: str, axes: Sequence[str] = AXES,
                 bandwidth_hz: float = 5.0, null_damping: float = 10.0) -> None:
        bad = [a for a in axes if a not in AXES]
        if bad or not axes:
            raise ConfigError(f"task-space hold: axes {list(axes)}; expected a non-empty subset "
                              f"of {list(AXES)}")
        self.own = own
        self.site = mujoco.mj_name2id(own.model, mujoco.mjtObj.mjOBJ_SITE, site)
        if self.site < 0:
            raise ConfigError(f"task-space hold: no site {site!r} in the arm's own model")
        self.rows = np.array([AXES.index(a) for a in axes])
        omega = 2 * np.pi * bandwidth_hz
        self.kp, self.kd = omega**2, 2 * omega
        self.null_damping = null_damping
        self.x_ref = None
        self.R_ref = None

    def pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP position (3,) and rotation (3, 3) at ``q`` on the own model."""
        m, d, own = self.own.model, self.own.data, self.own
        d.qpos[own.qpos_adr] = q
        mujoco.mj_kinematics(m, d)
        return d.site_xpos[self.site].copy(), d.site_xmat[self.site].reshape(3, 3).copy()

    def hold_here(self, q: np.ndarray) -> None:
        self.x_ref, self.R_ref = self.pose(q)

    def torque(self, q: np.ndarray, qd: np.ndarray, bridge: str = "rnea") -> np.ndarray:
        """The joint torques (J,) holding the reference pose: ``bridge`` "rnea" (the motion's
        inverse dynamics) or "constraint" (the constraint torque J' lambda alone)."""
        m, d, own = self.own.model, self.own.data, self.own
        dofs = own.dof_adr
        d.qpos[own.qpos_adr] = q
        d.qvel[:] = 0.0
        d.qvel[dofs] = qd
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_comVel(m, d)
        mujoco.mj_crb(m, d)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)
        M = full[np.ix_(dofs, dofs)]
        jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jacSite(m, d, jp, jr, self.site)
        jdp, jdr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jacDot(m, d, jdp, jdr, d.site_xpos[self.site], m.site_bodyid[self.site])
        J = np.vstack([jp, jr])[:, dofs][self.rows]
        Jdot_qd = (np.vstack([jdp, jdr])[:, dofs] @ qd)[self.rows]
        x, R = d.site_xpos[self.site], d.site_xmat[self.site].reshape(3, 3)
        err = np.zeros(6)
        err[:3] = self.x_ref - x
        rot = np.zeros(3)
        mujoco.mju_subQuat(rot, _quat(self.R_ref), _quat(R))  # in the TCP's frame
        err[3:] = R @ rot                                       # in the world, as J's rows
        vel = np.vstack([jp, jr])[:, dofs] @ qd
        xdd = self.kp * err[self.rows] - self.kd * vel[self.rows]
        qdd0 = -self.null_damping * qd
        Minv_Jt = np.linalg.solve(M, J.T)
        lam = np.linalg.solve(J @ Minv_Jt, xdd - Jdot_qd - J @ qdd0)
        qdd = qdd0 + Minv_Jt @ lam
        if bridge == "constraint":
            return M @ (qdd - qdd0)
        if bridge != "rnea":
            raise ConfigError(f"task-space hold: bridge {bridge!r}; expected 'rnea' or 'constraint'")
        return own.inverse_dynamics(q, qd, qdd) + own.armature * qdd + own.damping * qd


def _quat(R: np.ndarray) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_mat2Quat(out, R.reshape(9))
    return out
