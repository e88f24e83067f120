"""A certified lower bound on the distance between two bodies over every configuration of the
arm joints that move one but not the other: what lets the allowed-collision matrix skip a pair
as ``never`` without sampling luck.

The distance between bodies A and B depends only on the joints that move exactly one of them
(a joint moving both moves them rigidly together; every joint that is not an arm's is held at
the reference pose in a replay). With at most ``MAX_JOINTS`` such joints, their box of ranges is
split adaptively: at a box's centre the exact distance d is measured (``mj_geomDistance`` on
every geom pair MuJoCo would test); every configuration in the box is within ``sum_j L_j *
half_j`` of it, where half_j is the box's half-width in joint j and L_j bounds how fast joint j
moves any point of the body it moves (``model/reach.py``: m per rad, or 1 m per m for a slide).
A box is certified when ``d - sum_j L_j half_j >= margin``; one whose centre is closer than the
margin shows the pair can come that close (not certifiable). Unlimited hinges are taken over
[-pi, pi] (the whole turn); unlimited slides are not certified. Limited ranges are widened by
``pad`` on each side (recorded motion may overshoot a limit slightly).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Optional, Sequence

import mujoco
import numpy as np

#: pairs whose distance depends on more joints than this are not certified (the box grows as
#: the power of the count)
MAX_JOINTS = 2
#: centre evaluations per pair before giving up
MAX_EVALUATIONS = 100000
#: measured distances are capped here (a lower bound all the same), m
_DISTMAX = 1.0


@dataclass(frozen=True)
class PairBound:
    """A certified result.

    Attributes:
        lower: the certified lower bound on the distance over the box, m.
        closest: the smallest distance measured at a box centre, m.
        joints: the joints the distance depends on.
        evaluations: box centres measured.
    """

    lower: float
    closest: float
    joints: tuple[str, ...]
    evaluations: int


def certify_pair(model: mujoco.MjModel, data: mujoco.MjData, qpos: np.ndarray,
                 geoms: Sequence[tuple[int, int]], joints: Sequence[int],
                 lipschitz: np.ndarray, margin: float, pad: float,
                 max_evaluations: int = MAX_EVALUATIONS) -> Optional[PairBound]:
    """The certified lower bound of the pair's distance over the joints' box, or None when it
    cannot be shown to stay at or above ``margin`` (a centre came closer, the evaluation budget
    ran out, or a joint is an unlimited slide).

    Args:
        model, data: the model (read) and a scratch MjData (written).
        qpos: the reference pose (nq,): every other joint stays there.
        geoms: the geom pairs to measure (one body's geom, the other's).
        joints: model joint ids the distance depends on (at most ``MAX_JOINTS``).
        lipschitz: per joint, m per unit of the joint: the fastest it moves any point of the
            body it moves.
        margin: m.
        pad: rad or m added to each side of a limited range.
    """
    joints = list(joints)
    if len(joints) > MAX_JOINTS:
        return None
    lo, hi = np.empty(len(joints)), np.empty(len(joints))
    for k, j in enumerate(joints):
        if model.jnt_limited[j]:
            lo[k], hi[k] = model.jnt_range[j, 0] - pad, model.jnt_range[j, 1] + pad
        elif model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE:
            lo[k], hi[k] = -np.pi, np.pi
        else:
            return None
    adr = model.jnt_qposadr[joints] if joints else np.zeros(0, dtype=int)
    lip = np.asarray(lipschitz, dtype=float)

    def distance(q: np.ndarray) -> float:
        data.qpos[:] = qpos
        data.qpos[adr] = q
        mujoco.mj_kinematics(model, data)
        return min(mujoco.mj_geomDistance(model, data, g, h, _DISTMAX, None) for g, h in geoms)

    # Best first: the box with the smallest bound is split next, so a configuration closer than
    # the margin (when there is one) is reached quickly; the certificate is the same.
    lower, closest, evals, tie = np.inf, np.inf, 0, 0
    heap: list = []

    def push(a: np.ndarray, b: np.ndarray) -> bool:
        nonlocal lower, closest, evals, tie
        centre, half = (a + b) / 2.0, (b - a) / 2.0
        d = distance(centre)
        evals += 1
        closest = min(closest, d)
        if d < margin:
            return False
        bound = d - (float(lip @ half) if joints else 0.0)
        if bound >= margin:
            lower = min(lower, bound)
        else:
            tie += 1
            heapq.heappush(heap, (bound, tie, a, b))
        return True

    if not push(lo, hi):
        return None
    while heap:
        if evals >= max_evaluations:
            return None
        _, _, a, b = heapq.heappop(heap)
        half = (b - a) / 2.0
        k = int(np.argmax(lip * half))
        mid = (a[k] + b[k]) / 2.0
        left_b, right_a = b.copy(), a.copy()
        left_b[k], right_a[k] = mid, mid
        if not (push(a, left_b) and push(right_a, b)):
            return None
    return PairBound(float(lower), float(closest), tuple(model.joint(j).name for j in joints),
                     evals)
