"""The arm's real load, measured: from its efforts at rest in several poses, the gravity
parameters its model gets wrong, with their uncertainty, and the corrected model.

At rest each joint's actuator carries the arm's weight. The weight is linear in the masses and
first moments of the links, so with the model's gravity load split per fitted link,

    effort(q) = rest(q) + sum_b s_b G_b(q) + Y_m(q) m_p + Y_c(q) (m_p c_p) + e

- ``G_b``: the model's gravity load of link ``b`` alone (the body its joint moves, at the
  model's mass and centre of mass); ``s_b`` its mass factor (1: the model is right);
- ``m_p``, ``m_p c_p``: a payload at the arm's last link, its mass (kg) and first moment (kg m,
  in that body's frame): whatever the last link carries beyond the model (a gripper, a tool, a
  cable);
- ``rest``: everything not fitted, as the model has it;
- ``e``: what none of it explains (static friction carrying part of the load at rest, sensor
  noise), taken as independent with one variance.

Stacked over poses and joints this is linear least squares with ``sigma^2 = RSS / (n - p)``.
Gravity at rest identifies combinations of the links' masses, not each link's own (a column
the others nearly repeat): alone, least squares put the OpenArm's link 4 at -0.12 times its
mass (+- 0.72) while predicting every pose right. So each mass factor carries a prior (1 +-
``MASS_PRIOR``) and the estimate is the most probable one, with covariance ``(A^T A / sigma^2
+ P)^-1``: what the poses identify comes from the data, the rest stays near the model and its
standard error says so. :func:`load_poses` picks poses that make ``A^T A`` large.

Shapes: (J,) per arm, poses (P, J), the regressor (P J, K). Units: N m, kg, m.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Optional, Sequence

import mujoco
import numpy as np

#: the payload's parameters, after the mass factors
PAYLOAD = ("payload_kg", "payload_kgm_x", "payload_kgm_y", "payload_kgm_z")
#: a link's mass factor before the data: 1 +- this (1 sigma); vendors' link masses are CAD
#: estimates (openarm_description#49), off by tens of percent, not by a factor
MASS_PRIOR = 0.3


class LoadRegressor:
    """The linear gravity model of one arm (module docstring) on its own copy of the scene's
    model (the GravityModel's, contacts and constraints off).

    Args:
        gravity: the arm's :class:`~mj_manipulator_ros.hil.gravity_check.GravityModel`.
        links: the joints whose child bodies' masses are fitted (None: every joint; empty:
            none, the payload alone).
    """

    def __init__(self, gravity, links: Optional[Sequence[str]] = None) -> None:
        self.gravity = gravity
        model = gravity.model
        names = list(gravity.joint_names)
        joint_ids = [int(model.dof_jntid[d]) for d in gravity.dof_adr]
        self.links = tuple(names if links is None else links)
        self.bodies = [int(model.jnt_bodyid[joint_ids[names.index(j)]]) for j in self.links]
        self.hand = int(model.jnt_bodyid[joint_ids[-1]])
        self.names = tuple(f"mass_factor:{j}" for j in self.links) + PAYLOAD
        self._g = np.asarray(model.opt.gravity, dtype=float)
        nv = model.nv
        self._jacp, self._jacr = np.zeros((3, nv)), np.zeros((3, nv))

    def rows(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """At pose ``q`` (J,): the regressor rows (J, K) and the part not fitted (J,), N m."""
        g = self.gravity
        expected = g.expected(q)                 # runs mj_forward at q on g.data
        m, d, dofs = g.model, g.data, g.dof_adr
        cols = []
        for b in self.bodies:                    # the model's load of link b alone
            mujoco.mj_jacBodyCom(m, d, self._jacp, None, b)
            cols.append(-self._jacp[:, dofs].T @ (m.body_mass[b] * self._g))
        fitted = np.sum(cols, axis=0) if cols else np.zeros(len(dofs))
        mujoco.mj_jac(m, d, self._jacp, self._jacr, d.xpos[self.hand], self.hand)
        jv, jw = self._jacp[:, dofs], self._jacr[:, dofs]
        cols.append(-jv.T @ self._g)             # per kg at the last link's origin
        rot = d.xmat[self.hand].reshape(3, 3)
        for k in range(3):                       # per kg m of first moment along its axis k
            cols.append(-jw.T @ np.cross(rot[:, k], self._g))
        return np.stack(cols, axis=1), expected - fitted

    def predict(self, q: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """The effort at rest (J,) at ``q`` under parameters ``theta`` (K,)."""
        a, rest = self.rows(q)
        return rest + a @ theta

    def nominal(self) -> np.ndarray:
        """The model's own parameters: every factor 1, no payload."""
        return np.concatenate([np.ones(len(self.bodies)), np.zeros(len(PAYLOAD))])


@dataclass(frozen=True)
class LoadFit:
    """The fitted parameters (K,) with their standard errors, the residual's RMS (N m) and
    how many equations (poses x joints) they rest on."""

    names: tuple[str, ...]
    estimate: np.ndarray
    std: np.ndarray
    rms: float
    equations: int

    def describe(self) -> str:
        parts = []
        for n, v, s in zip(self.names, self.estimate, self.std):
            what = f"{n.split(':')[1]}'s link x" if n.startswith("mass_factor:") else f"{n} "
            parts.append(f"{what}{v:.3f} +- {s:.3f}")
        return (f"{'; '.join(parts)} (1 sigma; residual RMS {self.rms:.3f} N m over "
                f"{self.equations} equations)")

    def overlay(self, regressor: LoadRegressor) -> dict:
        """The corrected model as an overlay: per body, its mass (kg) and centre of mass (m,
        body frame), the payload folded into the last link: what
        :mod:`~mj_manipulator_ros.model.mass_overlay` reads (``scene.mass_overlay``)."""
        m = regressor.gravity.model
        bodies = {}
        for b, s in zip(regressor.bodies, self.estimate):
            bodies[int(b)] = {"mass": float(m.body_mass[b] * s),
                              "com": [float(x) for x in m.body_ipos[b]]}
        mp, moment = float(self.estimate[-4]), np.asarray(self.estimate[-3:], dtype=float)
        h = regressor.hand
        base = bodies.get(h, {"mass": float(m.body_mass[h]),
                              "com": [float(x) for x in m.body_ipos[h]]})
        total = base["mass"] + mp
        com = (base["mass"] * np.asarray(base["com"]) + moment) / total
        bodies[h] = {"mass": float(total), "com": [float(x) for x in com]}
        return {"bodies": {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b): v
                           for b, v in bodies.items()},
                "fit": {n: {"estimate": float(v), "std": float(s)}
                        for n, v, s in zip(self.names, self.estimate, self.std)},
                "residual_rms_nm": self.rms}


def payload_explanation(regressor: LoadRegressor, q: np.ndarray,
                        effort: np.ndarray) -> tuple[float, float]:
    """At one pose: the payload mass at the last link (kg; negative: the arm lighter than the
    model) and first moment that best explain ``effort`` (J,) at ``q``, by least squares (4
    unknowns, J equations); returns (mass, the largest |residual| left, N m)."""
    a, rest = regressor.rows(np.asarray(q, dtype=float))
    k = len(regressor.bodies)
    b = np.asarray(effort, dtype=float) - rest - a[:, :k].sum(axis=1)
    theta, *_ = np.linalg.lstsq(a[:, k:], b, rcond=None)
    return float(theta[0]), float(np.max(np.abs(b - a[:, k:] @ theta)))


def fit_load(regressor: LoadRegressor, poses: np.ndarray, efforts: np.ndarray,
             mass_prior: float = MASS_PRIOR,
             effort_floor: Optional[np.ndarray] = None) -> LoadFit:
    """The load from ``poses`` (P, J) and the efforts measured at rest there (P, J).

    Gravity at rest identifies combinations of the links' masses (base parameters), not every
    link's own: by least squares alone a link can come out of any mass, negative too, while
    the combination the poses see is right. So each mass factor carries a prior, 1 (the
    model) with standard deviation ``mass_prior``; the payload none. The estimate is the most
    probable under both (the noise variance from the plain least-squares residual): the
    combinations the poses identify come from the data; the rest stay near the model, and
    their standard errors say so (about ``mass_prior``). 0: plain least squares.

    ``effort_floor`` (J,): each joint's error at rest is taken as at least this (N m, one
    sigma): static friction holds part of the load at rest, by an amount that depends on how
    the joint came to rest, the same at nearby poses (not independent noise: at a bring-up's
    nearby poses a healthy OpenArm's residual of 0.016 N m made link 2 "x1.50 +- 0.20").
    """
    a_rows, b_rows = [], []
    for q, e in zip(poses, efforts):
        a, rest = regressor.rows(np.asarray(q, dtype=float))
        a_rows.append(a)
        b_rows.append(np.asarray(e, dtype=float) - rest)
    a, b = np.concatenate(a_rows), np.concatenate(b_rows)
    theta, *_ = np.linalg.lstsq(a, b, rcond=None)
    dof = max(1, a.shape[0] - a.shape[1])
    residual = b - a @ theta
    sigma = np.full(a.shape[0], np.sqrt(max(float(residual @ residual) / dof, 1e-12)))
    if effort_floor is not None:
        sigma = np.maximum(sigma, np.tile(np.asarray(effort_floor, dtype=float), len(poses)))
    aw, bw = a / sigma[:, None], b / sigma
    info = aw.T @ aw
    if mass_prior > 0:
        k = len(regressor.bodies)
        prior = np.zeros(a.shape[1])
        prior[:k] = 1.0 / mass_prior ** 2
        theta = np.linalg.solve(info + np.diag(prior),
                                aw.T @ bw + prior * regressor.nominal())
        info = info + np.diag(prior)
        residual = b - a @ theta
    elif effort_floor is not None:
        theta, *_ = np.linalg.lstsq(aw, bw, rcond=None)
        residual = b - a @ theta
    cov = np.linalg.pinv(info)
    return LoadFit(regressor.names, theta, np.sqrt(np.maximum(np.diag(cov), 0.0)),
                   float(np.sqrt(np.mean(residual ** 2))), a.shape[0])


def load_poses(regressor: LoadRegressor, start: np.ndarray, lower: np.ndarray,
               upper: np.ndarray, count: int, max_move: float,
               movers: Sequence[int] = (), free=None) -> list[np.ndarray]:
    """``count`` poses (each the start pose with one or two joints turned by up to
    ``max_move``, inside the limits, and ``free(q)`` where given: no collision) picked greedily
    to make ``A^T A`` of the fit large (D-optimal: the largest log-determinant, a ridge keeping
    the first picks defined); the start pose first."""
    n = len(start)
    movers = list(movers) or list(range(n))
    steps = [s * max_move for s in (-1.0, -0.5, 0.5, 1.0)]
    candidates = []
    for i, k in enumerate(movers):
        for d in steps:
            q = np.array(start, dtype=float)
            q[k] += d
            candidates.append(q)
            for k2 in movers[i + 1:]:
                for d2 in steps:
                    q2 = q.copy()
                    q2[k2] += d2
                    candidates.append(q2)
    margin = 0.05
    candidates = [q for q in candidates
                  if np.all(q >= lower + margin) and np.all(q <= upper - margin)
                  and (free is None or free(q))]
    rows = [regressor.rows(q)[0] for q in candidates]
    chosen = [np.array(start, dtype=float)]
    info = regressor.rows(chosen[0])[0]
    info = info.T @ info + 1e-6 * np.eye(info.shape[1])
    left = list(range(len(candidates)))
    while len(chosen) < count and left:
        gains = [np.linalg.slogdet(info + rows[i].T @ rows[i])[1] for i in left]
        best = left.pop(int(np.argmax(gains)))
        chosen.append(candidates[best])
        info = info + rows[best].T @ rows[best]
    return chosen


def contact_free(scene, arm: str, margin: float = 0.01):
    """A predicate: does the arm at pose ``q`` (J,), the rest of the scene at its initial pose,
    stay ``margin`` m clear of every body it does not touch there already (the scene's model,
    its own copy of the model and MjData: MuJoCo's contacts within the margin; the scene's
    model, which a simulator may be stepping, is only read)."""
    model = copy.deepcopy(scene.model)
    data = mujoco.MjData(model)
    binding = scene.arms[arm]
    bodies = set(binding.body_ids)

    def touching(q=None) -> set:
        data.qpos[:] = scene.initial_qpos
        if q is not None:
            data.qpos[np.asarray(binding.qpos_adr)] = q
        saved = model.geom_margin.copy()
        model.geom_margin[:] = margin
        try:
            mujoco.mj_forward(model, data)
        finally:
            model.geom_margin[:] = saved
        pairs = set()
        for c in data.contact[:data.ncon]:
            a, b = int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2])
            if a in bodies or b in bodies:
                pairs.add((min(a, b), max(a, b)))
        return pairs

    already = touching()

    def free(q: np.ndarray) -> bool:
        return not (touching(q) - already)
    return free
