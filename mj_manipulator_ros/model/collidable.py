"""Which geoms MuJoCo can ever report in a contact, and the arm bodies it never can.

A geom takes part in collision detection when its ``contype`` or ``conaffinity`` is non-zero;
it can touch another geom only when ``(contype_a & conaffinity_b) | (contype_b & conaffinity_a)``
is non-zero (MuJoCo's bit rule; ``<pair>`` elements add explicit pairs). A body all of whose
geoms can touch nothing is invisible to every collision check: an arm striking it (its own base,
another arm's) is never seen. Such bodies are listed as "not collidable" by ``scene-info`` and by
every check's scope, so that a user who sees the body in a picture knows the check does not.
"""

from __future__ import annotations

from typing import Mapping

import mujoco
import numpy as np

from mj_manipulator_ros.model.arm_binding import ArmBinding


def active_geoms(model: mujoco.MjModel) -> np.ndarray:
    """(ngeom,) bool: geoms with a non-zero ``contype`` or ``conaffinity``."""
    return (model.geom_contype != 0) | (model.geom_conaffinity != 0)


def bits_touch(contype_a: int, conaffinity_a: int, contype_b: int, conaffinity_b: int) -> bool:
    """MuJoCo's bit rule: geoms with these ``contype``/``conaffinity`` bits may touch."""
    return bool((contype_a & conaffinity_b) or (contype_b & conaffinity_a))


def can_touch(model: mujoco.MjModel, g: int, h: int) -> bool:
    """Whether MuJoCo's bit rule lets geoms ``g`` and ``h`` touch (``<pair>`` elements and the
    body filters aside)."""
    ct, ca = model.geom_contype, model.geom_conaffinity
    return bits_touch(int(ct[g]), int(ca[g]), int(ct[h]), int(ca[h]))


def with_contact_margin(model: mujoco.MjModel, reach: float) -> mujoco.MjModel:
    """A copy of ``model`` whose active geoms report every pair closer than ``reach`` (m; half
    of it on each geom's margin, no gap): contacts at positive distance, for clearances."""
    import copy

    m = copy.deepcopy(model)
    m.geom_margin[active_geoms(m)] = reach / 2.0
    m.geom_gap[:] = 0.0
    return m


def touchable_geoms(model: mujoco.MjModel) -> np.ndarray:
    """(ngeom,) bool: geoms that can touch at least one geom of another body, by the bit rule
    or an explicit ``<pair>``."""
    ct = model.geom_contype.astype(np.int64)
    ca = model.geom_conaffinity.astype(np.int64)
    match = ((ct[:, None] & ca[None, :]) | (ct[None, :] & ca[:, None])) != 0
    match &= model.geom_bodyid[:, None] != model.geom_bodyid[None, :]
    out = match.any(axis=1)
    for k in range(model.npair):
        out[model.pair_geom1[k]] = out[model.pair_geom2[k]] = True
    return out


#: the key of the bodies no arm moves (bases, pedestals, fixed obstacles)
ENVIRONMENT = "environment"


def not_collidable(model: mujoco.MjModel,
                   arms: Mapping[str, ArmBinding]) -> dict[str, tuple[str, ...]]:
    """Per arm (and :data:`ENVIRONMENT` for the bodies no arm moves, such as an arm's base),
    the bodies that hold geoms of which none can touch anything, in body order; groups with none
    are left out. Bodies without any geom are not listed (there is nothing to see)."""
    touch = touchable_geoms(model)
    owner = {b: name for name, arm in arms.items() for b in arm.body_ids}
    out: dict[str, list[str]] = {}
    for b in range(model.nbody):
        geoms = np.flatnonzero(model.geom_bodyid == b)
        if geoms.size and not touch[geoms].any():
            out.setdefault(owner.get(b, ENVIRONMENT), []).append(model.body(b).name)
    order = [*arms, ENVIRONMENT]
    return {k: tuple(out[k]) for k in order if k in out}
