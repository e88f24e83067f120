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

**Where the distance is exact.** The bound is only as good as ``mj_geomDistance``, which runs
the collider of the geom-type pair with ``distmax`` as its margin. Only the pairs of
:data:`EXACT_ANALYTIC` (closed-form colliders) and :data:`EXACT_GJK` (convex shapes through
GJK/EPA, with native CCD at MuJoCo's default or stricter ``ccd_tolerance``/``ccd_iterations``)
are certified; :func:`inexact_distance` says why any other pair is not. Not exact: a heightfield
(its collider raises every prism by ``distmax`` and keeps at most 50 prisms per pair, found in
grid order: a link 30-40 mm inside the terrain reads 200-400 mm away), an SDF (gradient descent
from a few starting points), convex pairs under the legacy CCD or looser GJK settings (the
distance depends on ``distmax``, or GJK stops early). ``test_collision_matrix.py`` backs the
lists against MuJoCo's own collision pass.
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

_G = mujoco.mjtGeom
#: geom-type pairs (as frozensets of ``mjtGeom`` values) whose collider is closed-form:
#: ``mj_geomDistance`` is the exact distance whatever the CCD settings
EXACT_ANALYTIC = frozenset(frozenset((int(a), int(b))) for a, b in (
    (_G.mjGEOM_PLANE, _G.mjGEOM_SPHERE), (_G.mjGEOM_PLANE, _G.mjGEOM_CAPSULE),
    (_G.mjGEOM_PLANE, _G.mjGEOM_ELLIPSOID), (_G.mjGEOM_PLANE, _G.mjGEOM_CYLINDER),
    (_G.mjGEOM_PLANE, _G.mjGEOM_BOX), (_G.mjGEOM_PLANE, _G.mjGEOM_MESH),
    (_G.mjGEOM_SPHERE, _G.mjGEOM_SPHERE), (_G.mjGEOM_SPHERE, _G.mjGEOM_CAPSULE),
    (_G.mjGEOM_SPHERE, _G.mjGEOM_CYLINDER), (_G.mjGEOM_SPHERE, _G.mjGEOM_BOX),
    (_G.mjGEOM_CAPSULE, _G.mjGEOM_CAPSULE), (_G.mjGEOM_CAPSULE, _G.mjGEOM_BOX)))
_CONVEX = (_G.mjGEOM_SPHERE, _G.mjGEOM_CAPSULE, _G.mjGEOM_ELLIPSOID, _G.mjGEOM_CYLINDER,
           _G.mjGEOM_BOX, _G.mjGEOM_MESH)
#: the other pairs of convex shapes (a mesh collides as its convex hull): exact through GJK/EPA
#: under native CCD with settings at least as strict as :data:`GJK_DEFAULTS`
EXACT_GJK = frozenset(frozenset((int(a), int(b))) for a in _CONVEX for b in _CONVEX) \
    - EXACT_ANALYTIC
#: MuJoCo's default ``(ccd_tolerance, ccd_iterations)``, the settings ``EXACT_GJK`` was measured at
GJK_DEFAULTS = (1e-6, 35)


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


def inexact_distance(model: mujoco.MjModel, g: int, h: int) -> Optional[str]:
    """None when ``mj_geomDistance`` is the exact distance between geoms ``g`` and ``h`` (see
    the module's doc), else why it is not (for the matrix's evidence)."""
    types = frozenset((int(model.geom_type[g]), int(model.geom_type[h])))
    kinds = " x ".join(sorted(_G(int(model.geom_type[x])).name[7:].lower() for x in (g, h)))
    where = f"{kinds} ({model.geom(g).name or f'geom {g}'} x {model.geom(h).name or f'geom {h}'})"
    if types in EXACT_ANALYTIC:
        return None
    if types in EXACT_GJK:
        tol, iters = float(model.opt.ccd_tolerance), int(model.opt.ccd_iterations)
        if model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_NATIVECCD:
            return f"{where}: the legacy CCD (nativeccd disabled) gives no exact distance"
        if tol > GJK_DEFAULTS[0] or iters < GJK_DEFAULTS[1]:
            return (f"{where}: GJK may stop short of the distance with ccd_tolerance {tol:g} "
                    f"and ccd_iterations {iters} (exact at <= {GJK_DEFAULTS[0]:g} and "
                    f">= {GJK_DEFAULTS[1]})")
        return None
    if int(_G.mjGEOM_HFIELD) in types:
        return (f"{where}: MuJoCo's heightfield distance is not exact (each prism is raised by "
                "distmax and at most 50 prisms per pair are kept, in grid order)")
    if int(_G.mjGEOM_SDF) in types:
        return f"{where}: an SDF's distance is a local search, not exact"
    return f"{where}: mj_geomDistance has no exact distance for this pair of types"


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
        geoms: the geom pairs to measure (one body's geom, the other's), each with an exact
            distance (:func:`inexact_distance` None).
        joints: model joint ids the distance depends on (at most ``MAX_JOINTS``).
        lipschitz: per joint, m per unit of the joint: the fastest it moves any point of the
            body it moves.
        margin: m.
        pad: rad or m added to each side of a limited range.

    Raises:
        ValueError: a geom pair whose distance is not exact: nothing can be certified on it.
    """
    inexact = [why for g, h in geoms if (why := inexact_distance(model, g, h))]
    if inexact:
        raise ValueError(f"cannot certify on an inexact distance: {inexact[0]}")
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
