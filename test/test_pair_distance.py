"""The geom-type pairs on which a ``never`` proof may be built (``model/pair_distance.py``:
``EXACT_ANALYTIC``, ``EXACT_GJK``) against MuJoCo's own collision pass.

The reference is ``mj_collision`` on the plain model with every geom's margin at half the
check's margin (what the discrete check sees): where it reports a pair, the oracle
(``mj_geomDistance``, distmax 1 m, as the proof calls it) must not read the pair farther apart
than it does (a proof on an oracle that reads too far certifies a pair that collides), and the
oracle must be a distance: the same with a distmax of 1 cm wherever that one is below 1 cm.
For polytopes (boxes, mesh hulls) the oracle is also checked against the exact distance
(Wolfe's minimum-norm point of the Minkowski difference). Every pair the lists leave off for a
reason shows why.
"""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.core.config import config_from_mapping, load_config
from mj_manipulator_ros.model.pair_distance import (EXACT_ANALYTIC, EXACT_GJK, GJK_DEFAULTS,
                                                    certify_pair, inexact_distance)
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file

G = mujoco.mjtGeom
MARGIN = 0.005          # the check's default margin: the collision pass reports pairs inside it
#: how much closer than the oracle MuJoCo's collision pass may read a pair, m
ABOVE_TOL = 1e-4
#: MuJoCo's box-box collider (separating axes) reads separated boxes up to 0.47 mm closer than
#: they are (the oracle is exact there: test_the_oracle_is_the_exact_distance_between_polytopes)
ABOVE_TOL_PAIR = {("box", "box"): 1e-3}
SHAPES = {  # one geom of each type, about 5-10 cm across
    "plane": '<geom name="{n}" type="plane" size="0 0 1"/>',
    "sphere": '<geom name="{n}" type="sphere" size="0.05"/>',
    "capsule": '<geom name="{n}" type="capsule" size="0.03 0.06"/>',
    "ellipsoid": '<geom name="{n}" type="ellipsoid" size="0.06 0.04 0.03"/>',
    "cylinder": '<geom name="{n}" type="cylinder" size="0.04 0.05"/>',
    "box": '<geom name="{n}" type="box" size="0.05 0.03 0.04"/>',
    "mesh": '<geom name="{n}" type="mesh" mesh="hull"/>',
    "hfield": '<geom name="{n}" type="hfield" hfield="terrain"/>',
}
_rng = np.random.default_rng(1)
ASSETS = ('<asset><mesh name="hull" vertex="{}"/>'.format(
    " ".join(f"{v:.4f}" for v in (_rng.normal(size=(12, 3)) * [0.05, 0.04, 0.03]).ravel()))
    + '<hfield name="terrain" nrow="20" ncol="20" size="0.3 0.3 0.1 0.05" elevation="{}"/>'
    '</asset>'.format(" ".join(f"{v:.3f}" for v in _rng.uniform(0, 1, 400))))


def type_name(t: int) -> str:
    return G(t).name[len("mjGEOM_"):].lower()


def pair_model(fixed: str, moving: str, option: str = "") -> mujoco.MjModel:
    """Geom "A" of type ``fixed`` in the world, geom "B" of type ``moving`` on a free body."""
    return mujoco.MjModel.from_xml_string(
        f"<mujoco>{option}{ASSETS}<worldbody>{SHAPES[fixed].format(n='A')}<body name='B'>"
        f"<freejoint/>{SHAPES[moving].format(n='B')}</body></worldbody></mujoco>")


def compare(m: mujoco.MjModel, n: int = 2000, seed: int = 0) -> dict:
    """B at ``n`` random poses around A, from deep inside to a few mm beyond its reach: the
    oracle against the collision pass (margins MARGIN / 2 each)."""
    m = copy.deepcopy(m)
    m.geom_margin[:] = MARGIN / 2
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    kind = int(m.geom_type[0])
    reach = m.geom_rbound[1] + (0.0 if kind in (G.mjGEOM_PLANE, G.mjGEOM_HFIELD) else m.geom_rbound[0])
    out = {"above": 0.0, "distmax": 0.0, "penetrating": 0, "separated": 0}
    for _ in range(n):
        quat = rng.normal(size=4)
        if kind == G.mjGEOM_PLANE:
            pos = np.r_[rng.uniform(-0.3, 0.3, 2), rng.uniform(-reach, reach + 0.01)]
        elif kind == G.mjGEOM_HFIELD:
            pos = np.r_[rng.uniform(-0.25, 0.25, 2), rng.uniform(0.0, 0.1 + reach + 0.01)]
        else:
            u = rng.normal(size=3)
            pos = u / np.linalg.norm(u) * rng.uniform(0.0, reach + 0.01)
        d.qpos[:3], d.qpos[3:7] = pos, quat / np.linalg.norm(quat)
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        oracle = mujoco.mj_geomDistance(m, d, 0, 1, 1.0, None)
        near = mujoco.mj_geomDistance(m, d, 0, 1, 0.01, None)
        if near < 0.01:
            out["distmax"] = max(out["distmax"], abs(oracle - near))
        if d.ncon:
            seen = float(d.contact.dist[:d.ncon].min())
            out["above"] = max(out["above"], oracle - max(seen, 0.0))
            out["penetrating" if seen < 0 else "separated"] += 1
    return out


#: (fixed, moving) type names, a plane first (a plane cannot move)
EXACT = sorted((type_name(min(p)), type_name(max(p))) for p in EXACT_ANALYTIC | EXACT_GJK)


@pytest.mark.parametrize("pair", EXACT, ids=["-".join(p) for p in EXACT])
def test_on_the_list_the_oracle_reads_what_the_collision_pass_reads(pair) -> None:
    a, b = pair
    m = pair_model(a, b)
    assert inexact_distance(m, 0, 1) is None
    found = compare(m)
    assert found["penetrating"] >= 50 and found["separated"] >= 20, f"coverage: {found}"
    assert found["above"] <= ABOVE_TOL_PAIR.get(pair, ABOVE_TOL), f"{a}-{b}: the oracle reads {found['above'] * 1e3:.3f} " \
        "mm farther than MuJoCo's collision pass"
    assert found["distmax"] <= 1e-9, f"{a}-{b}: the oracle depends on distmax: {found}"


def min_norm_point(points: np.ndarray) -> np.ndarray:
    """Wolfe's algorithm: the point of the convex hull of ``points`` (N, 3) nearest the origin."""
    norms = (points ** 2).sum(1)
    support, lam = [int(np.argmin(norms))], np.ones(1)
    x = points[support[0]]
    for _ in range(1000):
        j = int(np.argmin(points @ x))
        if x @ x - points[j] @ x <= 1e-12 * norms.max() or j in support:
            return x
        support, lam = support + [j], np.append(lam, 0.0)
        while True:   # the affine minimum of the support; drop points until it is inside
            q = points[support]
            n = len(support)
            kkt = np.block([[q @ q.T, np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
            mu = np.linalg.lstsq(kkt, np.r_[np.zeros(n), 1.0], rcond=None)[0][:n]
            if np.all(mu > 1e-14):
                lam, x = mu, mu @ q
                break
            out = (mu <= 1e-14) & (lam - mu > 0)
            theta = min(1.0, float(np.min(lam[out] / (lam[out] - mu[out])))) if out.any() else 1.0
            lam = lam + theta * (mu - lam)
            keep = lam > 1e-14
            support, lam = [s for s, k in zip(support, keep) if k], lam[keep] / lam[keep].sum()
            x = lam @ points[support]
    raise AssertionError("Wolfe's algorithm did not converge")


def polytope(m: mujoco.MjModel, d: mujoco.MjData, g: int) -> np.ndarray:
    """The world vertices of a box or a mesh geom (a mesh collides as their hull)."""
    if m.geom_type[g] == G.mjGEOM_BOX:
        local = np.array(list(itertools.product((-1, 1), repeat=3))) * m.geom_size[g]
    else:
        k = m.geom_dataid[g]
        local = m.mesh_vert[m.mesh_vertadr[k]:m.mesh_vertadr[k] + m.mesh_vertnum[k]]
    return local @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g]


@pytest.mark.parametrize("pair", [("box", "box"), ("box", "mesh"), ("mesh", "mesh")])
def test_the_oracle_is_the_exact_distance_between_polytopes(pair) -> None:
    m = pair_model(*pair)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(4)
    reach = m.geom_rbound[0] + m.geom_rbound[1]
    worst, separated = 0.0, 0
    for _ in range(500):
        quat, u = rng.normal(size=4), rng.normal(size=3)
        d.qpos[:3] = u / np.linalg.norm(u) * rng.uniform(0.0, reach + 0.01)
        d.qpos[3:7] = quat / np.linalg.norm(quat)
        mujoco.mj_kinematics(m, d)
        oracle = mujoco.mj_geomDistance(m, d, 0, 1, 1.0, None)
        if oracle <= 0:
            continue
        separated += 1
        diff = (polytope(m, d, 0)[:, None] - polytope(m, d, 1)[None]).reshape(-1, 3)
        worst = max(worst, abs(oracle - float(np.linalg.norm(min_norm_point(diff)))))
    assert separated >= 100, f"coverage: {separated}"
    assert worst <= 1e-8, f"{pair}: the oracle is {worst * 1e3:.4f} mm off the exact distance"


#: pairs off the lists, each with its evidence: (types, option, what inexact_distance says)
OFF = [(("hfield", t), "", "heightfield")
       for t in ("sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh")] + [
       (("mesh", "mesh"), '<option><flag nativeccd="disable"/></option>', "legacy CCD"),
       (("capsule", "mesh"), '<option><flag nativeccd="disable"/></option>', "legacy CCD"),
       (("box", "box"), '<option ccd_iterations="3"/>', "ccd_iterations 3"),
       (("cylinder", "box"), '<option ccd_tolerance="0.01"/>', "ccd_tolerance 0.01"),
       (("mesh", "mesh"), '<option ccd_tolerance="0.01"/>', "ccd_tolerance 0.01")]
#: type pairs MuJoCo has no collider for: never reported, nothing to prove
NO_COLLIDER = {frozenset((int(a), int(b))) for a, b in (
    (G.mjGEOM_PLANE, G.mjGEOM_PLANE), (G.mjGEOM_PLANE, G.mjGEOM_HFIELD),
    (G.mjGEOM_HFIELD, G.mjGEOM_HFIELD))}


@pytest.mark.parametrize("pair, option, why", OFF, ids=[f"{'-'.join(p)} {w}" for p, _, w in OFF])
def test_off_the_list_the_oracle_misreads(pair, option, why) -> None:
    m = pair_model(*pair, option)
    assert why in (inexact_distance(m, 0, 1) or "")
    found = compare(m)
    assert max(found["above"], found["distmax"]) > 5e-4, f"{pair} {option}: {found}"


def test_the_gjk_settings_are_mujocos_defaults() -> None:
    m = mujoco.MjModel.from_xml_string("<mujoco/>")
    assert (m.opt.ccd_tolerance, m.opt.ccd_iterations) == GJK_DEFAULTS


def test_nothing_is_certified_on_an_inexact_distance() -> None:
    m = pair_model("hfield", "capsule")
    d = mujoco.MjData(m)
    with pytest.raises(ValueError, match="heightfield"):
        certify_pair(m, d, d.qpos.copy(), [(0, 1)], [], np.zeros(0), MARGIN, 0.01)


# ---- the scenes this package ships and tests --------------------------------------------------
UR5E = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
        "wrist_2_joint", "wrist_3_joint"]


def openarm():
    return scene_for(load_config(config_file("openarm_bimanual.yaml")))


def ur5e_robotiq():
    """The UR5e with the Robotiq 2F-85 in its reach (every geom type those models have)."""
    return scene_for(config_from_mapping({
        "arms": [{"name": "ur", "joint_names": [f"ur/{j}" for j in UR5E]}],
        "scene": {"models": [{"file": "ur5e:ur5e.xml", "prefix": "ur/"},
                             {"file": "robotiq:2f85.xml", "prefix": "g/", "pos": [0.4, 0, 0.2]}],
                  "floor": True}}))


def colliding_type_pairs(m: mujoco.MjModel) -> set:
    active = [g for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]]
    return {frozenset((int(m.geom_type[g]), int(m.geom_type[h])))
            for g, h in itertools.combinations(active, 2)
            if m.geom_bodyid[g] != m.geom_bodyid[h]
            and (m.geom_contype[g] & m.geom_conaffinity[h] or m.geom_contype[h] & m.geom_conaffinity[g])}


def test_every_geom_type_pair_of_the_shipped_and_test_scenes_is_on_the_list_or_shown_off_it() -> None:
    """The compiled OpenArm and UR5e/Robotiq scenes, and every geom type an inline test model
    uses (any two of them can meet in a scene): each pair is on the lists (backed above) or off
    them with its evidence (``OFF``: the heightfield pairs)."""
    pairs = colliding_type_pairs(openarm().model) | colliding_type_pairs(ur5e_robotiq().model)
    names = {type_name(t): t for t in range(mujoco.mjtGeom.mjNGEOMTYPES)}
    inline = {names[t] for f in Path(__file__).parent.glob("*.py")
              for t in re.findall(r'type="(\w+)"', f.read_text()) if t in names}
    assert {G.mjGEOM_CAPSULE, G.mjGEOM_BOX, G.mjGEOM_PLANE} <= inline, "fixture: the inline types"
    pairs |= {frozenset((int(a), int(b))) for a in inline for b in inline}
    shown_off = {frozenset(int(names[t]) for t in p) for p, option, _ in OFF if not option}
    unbacked = pairs - EXACT_ANALYTIC - EXACT_GJK - shown_off - NO_COLLIDER
    assert not unbacked, f"geom-type pairs used but not backed: " \
        f"{[sorted(type_name(t) for t in p) for p in unbacked]}"


@pytest.mark.parametrize("make", [openarm, ur5e_robotiq])
def test_the_real_meshes_agree_with_the_collision_pass(make) -> None:
    """Random poses of the arms within their ranges: every geom pair MuJoCo's collision pass
    reports within the margin, the oracle reads no farther (the lists were measured on small
    synthetic hulls; these are the robots' own)."""
    scene = make()
    m = copy.deepcopy(scene.model)
    active = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
    m.geom_margin[active], m.geom_gap[:] = MARGIN / 2, 0.0
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    worst, counts = 0.0, {}
    for _ in range(1000):
        d.qpos[:] = scene.initial_qpos
        for arm in scene.arms.values():
            d.qpos[arm.qpos_adr] = rng.uniform(arm.lower, arm.upper)
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        seen: dict = {}
        for k in range(d.ncon):
            key = tuple(sorted(int(g) for g in d.contact.geom[k]))
            seen[key] = min(seen.get(key, np.inf), float(d.contact.dist[k]))
        for (g, h), dist in seen.items():
            kinds = "-".join(sorted(type_name(int(m.geom_type[x])) for x in (g, h)))
            counts[kinds] = counts.get(kinds, 0) + 1
            worst = max(worst, mujoco.mj_geomDistance(m, d, g, h, 1.0, None) - max(dist, 0.0))
    assert counts.get("mesh-mesh", 0) >= 1000, f"coverage: {counts}"
    assert worst <= ABOVE_TOL, f"the oracle read {worst * 1e3:.3f} mm farther ({counts})"
