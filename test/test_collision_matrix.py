"""The gate checks everything an arm can hit (its own robot's structure, the floor, other
models, itself) by default, with an allowed-collision matrix generated from the model.

References are independent of the checker: MuJoCo's own ``mj_collision`` on the plain model
(every pair it reports, no categories, no matrix) and ``mj_geomDistance`` at chosen poses.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest
import yaml

from mj_manipulator_ros.check.preflight import PlanRefused, PreflightCheck, scene_checker
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.check.timeline import build_timeline
from mj_manipulator_ros.core.config import config_from_mapping, load_config
from mj_manipulator_ros.core.errors import ConfigError, JointLimitError
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan, save_plan
from mj_manipulator_ros.model.allowed_collisions import TOUCH_CLEARANCE, AllowReason, generate
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file, share_dir

OPENARM = "openarm_bimanual.yaml"
#: the left forearm (link4) into the pedestal post (world body's mesh), right arm at rest
INTO_PEDESTAL = [-0.05, 0.12, 0.62, 1.54, 0.01, -0.71, -1.07]
#: the left hand folded back into its own upper arm (inner finger into link2)
FOLDED = [-0.39, -2.55, 1.52, 2.39, -1.23, 0.38, -1.52]


def openarm():
    cfg = load_config(config_file(OPENARM))
    return cfg, scene_for(cfg)


def move_plan(cfg, left_goal, duration=3.0, n=61, right_goal=None) -> MultiArmPlan:
    """Both arms from rest to their goals (smoothstep in time, zero end velocities)."""
    t = np.linspace(0.0, duration, n)
    s = 3 * (t / duration) ** 2 - 2 * (t / duration) ** 3
    ds = (6 * t / duration ** 2) * (1 - t / duration)
    arms = {}
    for arm, goal in (("left", left_goal), ("right", right_goal)):
        a = next(x for x in cfg.arms if x.name == arm)
        g = np.zeros(len(a.joint_names)) if goal is None else np.asarray(goal, float)
        arms[arm] = ArmTrajectory(a.joint_names, t, s[:, None] * g, ds[:, None] * g)
    return MultiArmPlan(arms)


def deepest(report, bodies) -> float:
    """The report's deepest penetration between two bodies (over their geom pairs), m."""
    hits = [p for p in report.pairs if p.bodies == bodies]
    assert hits, f"{bodies} not among {[p.bodies for p in report.pairs]}"
    return max(p.max_penetration for p in hits)


def body_distance(scene, poses, body_a: str, body_b: str) -> float:
    """Independent reference: mj_geomDistance over every collision geom pair of two bodies."""
    m = scene.model
    d = mujoco.MjData(m)
    d.qpos[:] = scene.initial_qpos
    for arm, q in poses.items():
        d.qpos[scene.arms[arm].qpos_adr] = q
    mujoco.mj_kinematics(m, d)
    ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in (body_a, body_b)]
    geoms = [[g for g in range(m.ngeom) if m.geom_bodyid[g] == b and
              (m.geom_contype[g] or m.geom_conaffinity[g])] for b in ids]
    return min(mujoco.mj_geomDistance(m, d, g, h, 1.0, None) for g in geoms[0] for h in geoms[1])


# ---- the OpenArm pair ------------------------------------------------------------------------
def test_the_pedestal_the_arm_itself_refused_the_shipped_plans_pass() -> None:
    cfg, scene = openarm()
    depth = -body_distance(scene, {"left": INTO_PEDESTAL}, "openarm_left_link4", "world")
    assert depth > 0.025, f"fixture: the forearm should be inside the pedestal, is {depth:.4f} m"
    gate = PreflightCheck(cfg)
    with pytest.raises(PlanRefused) as info:
        gate(move_plan(cfg, INTO_PEDESTAL))
    report = info.value.report
    assert deepest(report, ("openarm_left_link4", "world")) == pytest.approx(depth, abs=1e-3)
    assert report.first_collision_time > 0
    assert all(p.arms == ("left", "environment") for p in report.pairs)
    assert "openarm_left_link4 x environment/world" in str(info.value)

    depth = -body_distance(scene, {"left": FOLDED}, "openarm_left_ee_inner_finger",
                           "openarm_left_link2")
    assert depth > 0.01, f"fixture: the finger should be inside the upper arm, is {depth:.4f} m"
    with pytest.raises(PlanRefused) as info:
        gate(move_plan(cfg, FOLDED))
    assert deepest(info.value.report, ("openarm_left_link2", "openarm_left_ee_inner_finger")) \
        == pytest.approx(depth, abs=1e-3)
    assert all(p.arms == ("left", "left") for p in info.value.report.pairs)
    assert info.value.report.min_clearance["left-self"]["distance"] < 0

    for name in ("openarm_crossing", "openarm_wave"):
        report = gate(load_plan(share_dir() / f"config/plans/{name}.yaml"))
        assert report.collision_free
        assert report.scope["checked"] == ["arm-arm", "arm-environment", "self"]
        assert {"left-self", "left-environment", "right-self", "right-environment",
                "left-right"} <= set(report.min_clearance)


def test_check_plan_with_no_options_refuses_the_pedestal_and_accepts_the_shipped_plans(tmp_path) -> None:
    cfg, _ = openarm()
    save_plan(move_plan(cfg, INTO_PEDESTAL), tmp_path / "pedestal.yaml")
    cli = [sys.executable, "-m", "mj_manipulator_ros.cli", "check-plan", "--config",
           str(config_file(OPENARM))]
    bad = subprocess.run(cli + [str(tmp_path / "pedestal.yaml"), "--json"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 1, bad.stderr
    out = json.loads(bad.stdout)
    assert ["openarm_left_link4", "world"] in [p["bodies"] for p in out["pairs"]]
    for name in ("openarm_crossing", "openarm_wave"):
        ok = subprocess.run(cli + [str(share_dir() / f"config/plans/{name}.yaml")],
                            capture_output=True, text=True, timeout=300)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "checked: arm-arm, arm-environment, self" in ok.stdout
    legacy = subprocess.run(cli + [str(tmp_path / "pedestal.yaml"), "--arm-env", "--self"],
                            capture_output=True, text=True, timeout=300)
    assert legacy.returncode == 1, "the old flags are accepted and change nothing"


def test_the_gate_refuses_the_pedestal_before_any_goal_is_sent(ros, scripted) -> None:
    from mj_manipulator_ros.check.preflight import preflight_for
    from mj_manipulator_ros.ros.executor import MultiArmExecutor

    base, _ = openarm()
    ctl = scripted({"left": "succeed", "right": "succeed"})
    raw = yaml.safe_load(config_file(OPENARM).read_text())["/**"]["ros__parameters"]
    cfg = config_from_mapping({
        "arms": [{"name": a.name, "joint_names": list(a.joint_names)} for a in base.arms],
        "execution": {"start_tolerance_rad": 0.0, "max_clock_offset_s": 0.0},
        "scene": {"models": [raw["scene"]["openarm"]], "timestep": "auto"}})
    with MultiArmExecutor(cfg, context=ros.context, preflight=preflight_for(cfg)) as executor:
        with pytest.raises(PlanRefused, match="openarm_left_link4 x environment/world"):
            executor.execute(move_plan(cfg, INTO_PEDESTAL))
    assert not ctl["left"].goals and not ctl["right"].goals


def test_the_openarm_matrix_lists_the_adjacent_links_and_nothing_a_pose_can_bring_closer() -> None:
    """Against fresh samples (another seed, 2000 poses of both arms): every 'always' pair is
    within the margin in all of them, no 'never' pair comes within it, no 'never_touch' pair
    within TOUCH_CLEARANCE, none below its certified bound, and every 'adjacent' pair is a
    parent-child pair across an arm joint."""
    cfg, scene = openarm()
    acm = scene_checker(cfg).allowed
    m = scene.model
    by = {r: [p for p in acm.pairs if p.reason is r] for r in AllowReason}
    assert {p.bodies for p in by[AllowReason.ADJACENT]} == {
        ("openarm_left_base_link", "openarm_left_link1"),
        ("openarm_right_base_link", "openarm_right_link1")}
    for p in by[AllowReason.ADJACENT]:
        child = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, p.bodies[1])
        assert m.body(m.body_parentid[child]).name == p.bodies[0] and m.body_jntnum[child] == 1
    assert not by[AllowReason.CONFIGURED]
    assert by[AllowReason.NEVER], "the structural near pairs should be proven (and skipped)"
    proven = by[AllowReason.NEVER] + by[AllowReason.NEVER_TOUCH]
    assert ("openarm_left_link5", "openarm_left_ee_base_link") in {
        p.bodies for p in by[AllowReason.NEVER_TOUCH]}, "the wrist: inside 5 mm, never touching"
    rng = np.random.default_rng(7)
    d = mujoco.MjData(m)

    def geoms(name):
        b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
        return [g for g in range(m.ngeom) if m.geom_bodyid[g] == b and
                (m.geom_contype[g] or m.geom_conaffinity[g])]
    pairs = {p.bodies: [(g, h) for g in geoms(p.bodies[0]) for h in geoms(p.bodies[1])]
             for p in proven + by[AllowReason.ALWAYS]}
    mins = {k: np.inf for k in pairs}
    maxs = {k: -np.inf for k in pairs}
    for _ in range(2000):
        d.qpos[:] = scene.initial_qpos
        for b in scene.arms.values():
            d.qpos[b.qpos_adr] = rng.uniform(b.lower, b.upper)
        mujoco.mj_kinematics(m, d)
        for bodies, geom_pairs in pairs.items():
            dist = min(mujoco.mj_geomDistance(m, d, g, h, 1.0, None) for g, h in geom_pairs)
            mins[bodies] = min(mins[bodies], dist)
            maxs[bodies] = max(maxs[bodies], dist)
    for p in proven:
        floor = acm.margin if p.reason is AllowReason.NEVER else TOUCH_CLEARANCE
        assert mins[p.bodies] >= floor, f"{p.bodies} came to {mins[p.bodies]:.4f} m"
        lower = float(p.detail.split(">= ")[1].split(" mm")[0]) * 1e-3
        assert mins[p.bodies] >= lower - 5e-5, f"{p.bodies}: below its certified bound"
    for p in by[AllowReason.ALWAYS]:
        assert maxs[p.bodies] < acm.margin, f"{p.bodies} opened to {maxs[p.bodies]:.4f} m"


# ---- a small robot with every kind of pair, against brute force ------------------------------
ROBOT = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="base" pos="0 0 0.3">
    <geom name="base_plate" type="cylinder" size="0.06 0.02" pos="0 0 -0.021"/>
    <body name="upper">
      <joint name="shoulder" axis="0 1 0" range="-2.6 2.6"/>
      <geom name="upper_geom" type="capsule" fromto="0 0 0.01 0.25 0 0.01" size="0.025"/>
      <body name="fore" pos="0.25 0 0">
        <joint name="elbow" axis="0 1 0" range="-3.05 3.05"/>
        <geom name="fore_geom" type="capsule" fromto="0.03 0 0 0.2 0 0" size="0.02"/>
        <body name="hand" pos="0.2 0 0">
          <joint name="wrist" axis="1 0 0" range="-1.5 1.5"/>
          <geom name="palm" type="box" size="0.01 0.03 0.01"/>
          <body name="finger_a" pos="0.05 0.011 0">
            <joint name="finger_a_slide" type="slide" axis="0 1 0" range="0 0.02"/>
            <geom name="finger_a_geom" type="box" size="0.02 0.01 0.01"/>
          </body>
          <body name="finger_b" pos="0.05 -0.011 0">
            <joint name="finger_b_slide" type="slide" axis="0 -1 0" range="0 0.02"/>
            <geom name="finger_b_geom" type="box" size="0.02 0.01 0.01"/>
          </body>
        </body>
      </body>
    </body>
  </body>
  <body name="block" pos="0.35 0.04 0.05"><geom name="block_geom" type="box" size="0.05 0.05 0.05"/></body>
</worldbody></mujoco>"""


def robot_config(tmp_path, separation=0.8):
    models = []
    for k, a in enumerate(("left", "right")):
        path = tmp_path / f"{a}.xml"
        path.write_text(ROBOT)
        models.append({"file": str(path), "prefix": f"{a}_", "pos": [0.0, k * separation, 0.0]})
    return config_from_mapping({
        "arms": [{"name": a, "joint_names": [f"{a}_shoulder", f"{a}_elbow", f"{a}_wrist"]}
                 for a in ("left", "right")],
        "scene": {"models": models, "floor": True}})


def reference_hits(scene, rows: np.ndarray, margin: float) -> list[set]:
    """Per state, the body pairs MuJoCo itself reports closer than ``margin`` on the plain model
    (geom margins margin/2, every pair it tests): no categories, no matrix."""
    m = copy.deepcopy(scene.model)
    active = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
    m.geom_margin[active] = margin / 2
    m.geom_gap[:] = 0
    d = mujoco.MjData(m)
    out = []
    for row in rows:
        d.qpos[:] = row
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        hits = set()
        for k in range(d.ncon):
            if d.contact.dist[k] < margin:
                g1, g2 = d.contact.geom[k]
                hits.add(frozenset((m.body(m.geom_bodyid[g1]).name, m.body(m.geom_bodyid[g2]).name)))
        out.append(hits)
    return out


def test_the_matrix_on_a_small_robot_agrees_with_brute_force(tmp_path) -> None:
    """Random motions of both arms: the checker (matrix, narrowed MuJoCo pairs) finds exactly
    the brute-force collisions minus the adjacent and always pairs, and no 'never' pair ever
    appears in the brute force."""
    cfg = robot_config(tmp_path)
    scene = scene_for(cfg)
    checker = PlanReplayChecker.from_scene(scene)
    acm = checker.allowed
    reasons = {frozenset(p.bodies): p.reason for p in acm.pairs}
    assert reasons[frozenset(("left_base", "left_upper"))] is AllowReason.ADJACENT
    assert reasons[frozenset(("left_hand", "left_finger_a"))] is AllowReason.FILTERED
    assert reasons[frozenset(("left_finger_a", "left_finger_b"))] is AllowReason.ALWAYS
    assert reasons[frozenset(("world", "left_upper"))] is AllowReason.NEVER, \
        "the floor is proven out of the upper arm's reach (and the world is never 'adjacent')"
    allowed = {k for k, r in reasons.items() if r in (AllowReason.ADJACENT, AllowReason.ALWAYS)}
    never = {k for k, r in reasons.items() if r is AllowReason.NEVER}
    touch = {k for k, r in reasons.items() if r is AllowReason.NEVER_TOUCH}
    rng = np.random.default_rng(11)
    lo = np.concatenate([b.lower for b in scene.arms.values()])
    hi = np.concatenate([b.upper for b in scene.arms.values()])
    found = {"self": 0, "environment": 0, "floor": 0}
    for trial in range(12):
        t = np.linspace(0.0, 2.0, 41)
        a, b = rng.uniform(lo, hi), rng.uniform(lo, hi)
        if trial == 0:  # the left hand folds back onto its own upper arm
            a, b = np.zeros(6), np.array([0.3, 3.0, 0.0, 0.0, 0.0, 0.0])
        q = a + (b - a) * (t[:, None] / 2.0)
        plan = MultiArmPlan({name: ArmTrajectory(arm.joint_names, t, q[:, 3 * k:3 * k + 3])
                             for k, (name, arm) in enumerate(scene.arms.items())})
        report = checker.check(plan, continuous=False)
        tl = build_timeline(plan, "synchronized", order=checker.arm_names)
        rows = checker._qpos({x: tl.positions[x] for x in checker.arm_names})
        ref = reference_hits(scene, rows, checker.margin)
        assert not any(h & never for h in ref), "a 'never' pair came within the margin"
        touching = reference_hits(scene, rows, TOUCH_CLEARANCE)
        assert not any(h & touch for h in touching), "a 'never_touch' pair came within 1 mm"
        expected = [h - allowed - touch for h in ref]
        assert report.colliding_states == sum(bool(h) for h in expected)
        seen = {frozenset(p.bodies) for p in report.pairs}
        assert seen == set().union(*expected)
        for p in report.pairs:
            if p.arms[0] == p.arms[1]:
                found["self"] += 1
            elif "floor" in p.geoms:
                found["floor"] += 1
            elif "environment" in p.arms:
                found["environment"] += 1
    assert all(found.values()), f"the trials should exercise every kind of pair: {found}"


def test_configured_pairs_are_never_silent_and_bad_entries_are_refused(tmp_path) -> None:
    cfg = robot_config(tmp_path)
    raw = dict(cfg.extra["scene"])
    entry = {"a": "left_fore", "b": "left_block", "reason": "foam bumper, measured 2026-11"}
    with_pair = config_from_mapping({"arms": [{"name": a.name, "joint_names": list(a.joint_names)}
                                              for a in cfg.arms],
                                     "scene": {**raw, "allowed_collisions": [entry]}})
    checker = scene_checker(with_pair)
    assert [p.bodies for p in checker.allowed.pairs if p.reason is AllowReason.CONFIGURED] == \
        [("left_fore", "left_block")]
    plan = MultiArmPlan({a: ArmTrajectory(b.joint_names, [0.0, 1.0], np.zeros((2, 3)))
                         for a, b in checker.arms.items()})
    summary = checker.check(plan).summary()
    assert "NOT CHECKED (scene.allowed_collisions): left_fore x left_block (foam bumper" in summary
    for bad, words in (({"a": "left_fore", "b": "nowhere", "reason": "x"}, "'nowhere' is not in"),
                       ({"a": "left_fore", "b": "left_block", "reason": " "}, "needs a reason"),
                       ({"a": "left_block", "b": "left_block", "reason": "x"}, "the same body"),
                       ({"a": "left_fore", "b": "left_block"}, r"expected \{a: BODY")):
        c = config_from_mapping({"arms": [{"name": a.name, "joint_names": list(a.joint_names)}
                                          for a in cfg.arms],
                                 "scene": {**raw, "allowed_collisions": [bad]}})
        with pytest.raises(ConfigError, match=words):
            scene_checker(c)


def test_poses_outside_the_proven_ranges_are_refused(tmp_path) -> None:
    """A 'never' pair is proven inside the joint ranges only: a replay beyond them is refused by
    name instead of trusted."""
    cfg = robot_config(tmp_path)
    checker = scene_checker(cfg)
    bounded = checker.allowed.bounded_joints()
    assert bounded, "the small robot should have a proven pair"
    joint = sorted(bounded)[0]
    arm = next(a for a, b in checker.arms.items() if joint in b.joint_names)
    k = checker.arms[arm].joint_names.index(joint)
    q = np.zeros((2, 3))
    q[1, k] = checker.arms[arm].upper[k] + 0.05
    plan = MultiArmPlan({a: ArmTrajectory(b.joint_names, [0.0, 1.0],
                                          q if a == arm else np.zeros((2, 3)))
                         for a, b in checker.arms.items()})
    with pytest.raises(JointLimitError, match=f"arm '{arm}', joint '{joint}'.*outside the model's range"):
        checker.check(plan)


def test_the_matrix_is_cached_by_fingerprint(tmp_path) -> None:
    cfg = robot_config(tmp_path)
    scene = scene_for(cfg)
    first = generate(scene.model, scene.arms, scene.initial_qpos, 0.005, cache_dir=tmp_path / "c")
    files = list((tmp_path / "c").glob("acm-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["fingerprint"] == first.fingerprint
    assert generate(scene.model, scene.arms, scene.initial_qpos, 0.005,
                    cache_dir=tmp_path / "c") == first
    other = generate(scene.model, scene.arms, scene.initial_qpos, 0.01, cache_dir=tmp_path / "c")
    assert other.fingerprint != first.fingerprint and len(list((tmp_path / "c").glob("*.json"))) == 2


# ---- a heightfield: never proven, always checked; every model edit regenerates ---------------
#: one arm link (a capsule, 0.23-0.27 m high, turning about z) over a 3 x 3 heightfield whose
#: highest points are 0.24 m high, with a cylinder (its own fixed body) above the link
TERRAIN_ARM = """<mujoco><compiler angle="radian"/>
<asset><hfield name="terrain" nrow="3" ncol="3" size="0.5 0.5 0.24 0.05"
               elevation="1 1 1  1 0 1  1 1 1"/></asset>
<worldbody><geom name="ground" type="hfield" hfield="terrain"/>
  <body name="pillar" pos="0 0 0.45"><geom name="pillar_geom" type="cylinder" size="0.03 0.05"/></body>
  <body name="link" pos="0 0 0.25"><joint name="yaw" axis="0 0 1" range="-2 2"/>
    <geom name="link_geom" type="capsule" fromto="0.05 0 0 0.3 0 0" size="0.02"/></body>
</worldbody></mujoco>"""


def terrain_scene(tmp_path):
    (tmp_path / "terrain_arm.xml").write_text(TERRAIN_ARM)
    return scene_for(config_from_mapping({
        "arms": [{"name": "arm", "joint_names": ["arm_yaw"]}],
        "scene": {"models": [{"file": str(tmp_path / "terrain_arm.xml"), "prefix": "arm_"}],
                  "floor": False}}))


def verdicts(acm) -> dict:
    """Body pair -> reason, or "checked: not provable"."""
    out = {p.bodies: p.reason.value for p in acm.pairs}
    out.update({p.bodies: "checked: not provable" for p in acm.unprovable})
    return out


def lower_a_corner(m: mujoco.MjModel) -> None:
    """The heightfield's centre raised to the top, one corner lowered (the same size)."""
    m.hfield_data[:] = [0, 1, 1, 1, 1, 1, 1, 1, 1]


def loosen_gjk(m: mujoco.MjModel) -> None:
    m.opt.ccd_tolerance = 1e-4


@pytest.mark.parametrize("edit", [lower_a_corner, loosen_gjk])
def test_an_edit_anywhere_in_the_compiled_model_regenerates_the_matrix(tmp_path, edit) -> None:
    """The cache is keyed on the whole compiled model: a heightfield's elevation data and the
    GJK settings (neither was in the old list of fields) each change a verdict, and the matrix
    read after the edit is the one a fresh generation gives."""
    scene = terrain_scene(tmp_path)
    edited = copy.deepcopy(scene.model)
    edit(edited)
    cache = tmp_path / "cache"
    before = generate(scene.model, scene.arms, scene.initial_qpos, 0.005, 200, cache_dir=cache)
    after = generate(edited, scene.arms, scene.initial_qpos, 0.005, 200, cache_dir=cache)
    assert after.fingerprint != before.fingerprint
    assert len(list(cache.glob("acm-*.json"))) == 2
    fresh = generate(edited, scene.arms, scene.initial_qpos, 0.005, 200, cache_dir=tmp_path / "new")
    assert after == fresh
    assert verdicts(fresh) != verdicts(before), "fixture: the edit should change a verdict"


#: a 10 x 10 heightfield (0.5 m half-size, 30-60 mm high) and an arm link (a capsule along y
#: from 0.23 to 0.5 m, 0.25 m high) that tilts about x into the terrain's far rows, where
#: MuJoCo's heightfield distance does not look; a cylinder on its own fixed body beside it
ROUGH_TERRAIN_ARM = """<mujoco><compiler angle="radian"/>
<asset><hfield name="terrain" nrow="10" ncol="10" size="0.5 0.5 0.1 0.05" elevation="{}"/></asset>
<worldbody><geom name="ground" type="hfield" hfield="terrain"/>
  <body name="pillar" pos="0.3 0.35 0.3"><geom name="pillar_geom" type="cylinder" size="0.03 0.05"/></body>
  <body name="link" pos="0 0.2 0.25"><joint name="pitch" axis="1 0 0" range="-1.2 1.2"/>
    <geom name="link_geom" type="capsule" fromto="0 0.03 0 0 0.3 0" size="0.02"/></body>
</worldbody></mujoco>""".format(" ".join(f"{0.3 + 0.03 * ((7 * k) % 11):.2f}" for k in range(100)))


def test_a_heightfield_pair_is_never_proven_and_a_link_driven_into_it_is_refused(tmp_path) -> None:
    """MuJoCo's distance to a heightfield reads a link inside it as far away (0.4 m here), which
    proved the pair 'never' and skipped it: the gate refuses a plan that tilts the link into
    the terrain, and its matrix lists the pair as checked, with the reason."""
    (tmp_path / "terrain.xml").write_text(ROUGH_TERRAIN_ARM)
    cfg = config_from_mapping({
        "arms": [{"name": "arm", "joint_names": ["arm_pitch"]}],
        "scene": {"models": [{"file": str(tmp_path / "terrain.xml"), "prefix": "arm_"}],
                  "floor": False}})
    scene = scene_for(cfg)
    t = np.linspace(0.0, 2.0, 41)
    tilt = np.linspace(0.0, -1.0, 41)
    rows = np.tile(scene.initial_qpos, (41, 1))
    rows[:, scene.arms["arm"].qpos_adr[0]] = tilt
    depth = -min(reference_min_dist(scene, row, "arm_link") for row in rows)
    assert depth > 0.03, f"fixture: the link should go into the terrain, goes {depth:.4f} m"
    gate = PreflightCheck(cfg)
    with pytest.raises(PlanRefused) as info:
        gate(MultiArmPlan({"arm": ArmTrajectory(("arm_pitch",), t, tilt[:, None])}))
    assert deepest(info.value.report, ("arm_link", "world")) == pytest.approx(depth, abs=2e-3)
    acm = gate.checker.allowed
    assert ("world", "arm_link") not in {p.bodies for p in acm.pairs}
    assert [p.bodies for p in acm.unprovable] == [("world", "arm_link")]
    assert "heightfield" in acm.unprovable[0].detail and "arm_ground" in acm.unprovable[0].detail
    assert "world x arm_link: capsule x hfield" in acm.table()
    assert ("arm_pillar", "arm_link") in {p.bodies for p in acm.pairs
                                          if p.reason is AllowReason.NEVER}, \
        "a pair of exact types is still proven"


def reference_min_dist(scene, row: np.ndarray, body: str) -> float:
    """MuJoCo's own collision pass on the plain model (margin 5 mm): the body's closest contact."""
    m = copy.deepcopy(scene.model)
    m.geom_margin[:] = 0.0025
    d = mujoco.MjData(m)
    d.qpos[:] = row
    mujoco.mj_kinematics(m, d)
    mujoco.mj_collision(m, d)
    b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body)
    dists = [d.contact.dist[k] for k in range(d.ncon) if b in m.geom_bodyid[d.contact.geom[k]]]
    return min(dists, default=np.inf)


def test_allowed_collisions_in_parameter_file_form(tmp_path) -> None:
    """ROS parameters cannot hold lists of mappings: names, each with its own section."""
    cfg = robot_config(tmp_path)
    scene = dict(cfg.extra["scene"])
    models = scene.pop("models")
    params = {"arms": ["left", "right"],
              **{a.name: {"joint_names": list(a.joint_names)} for a in cfg.arms},
              "scene": {**scene, "models": [f"m{k}" for k in range(len(models))],
                        **{f"m{k}": m for k, m in enumerate(models)},
                        "allowed_collisions": ["bumper"],
                        "bumper": {"a": "left_fore", "b": "left_block", "reason": "foam"}}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}))
    checker = scene_checker(load_config(path))
    assert [(p.bodies, p.detail) for p in checker.allowed.pairs
            if p.reason is AllowReason.CONFIGURED] == [(("left_fore", "left_block"), "foam")]
    params["scene"]["allowed_collisions"] = ["missing"]
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}))
    with pytest.raises(ConfigError, match="lists 'missing' but scene has no section 'missing'"):
        load_config(path)


def test_a_spline_overshooting_the_proven_ranges_between_states_is_refused(tmp_path) -> None:
    """Waypoints inside the range, the cubic spline between them outside: refused too."""
    cfg = robot_config(tmp_path)
    checker = scene_checker(cfg)
    joint = sorted(checker.allowed.bounded_joints())[0]
    arm = next(a for a, b in checker.arms.items() if joint in b.joint_names)
    k = checker.arms[arm].joint_names.index(joint)
    top = checker.arms[arm].upper[k]
    q, v = np.zeros((3, 3)), np.zeros((3, 3))
    q[1, k], v[1, k] = top - 0.005, 2.0   # at the top, still rising fast: the spline overshoots
    plan = MultiArmPlan({a: ArmTrajectory(b.joint_names, [0.0, 0.5, 1.0],
                                          q if a == arm else np.zeros((3, 3)),
                                          v if a == arm else np.zeros((3, 3)))
                         for a, b in checker.arms.items()})
    with pytest.raises(JointLimitError, match=f"joint '{joint}'.*outside the model's range"):
        checker.check(plan)


def test_processes_started_together_generate_one_matrix(tmp_path) -> None:
    """The simulator, the execution node and a check started at once on a new model: one of
    them generates the matrix, the others wait for its file and read it (regression: each
    generated its own, the OpenArm's taking ~9 s of CPU each)."""
    cfg = tmp_path / "robot.yaml"
    cfg.write_text(yaml.safe_dump({
        "arms": [{"name": a, "joint_names": [f"{a}_shoulder", f"{a}_elbow", f"{a}_wrist"]}
                 for a in ("left", "right")],
        "scene": {"models": [{"file": str(tmp_path / f"{a}.xml"), "prefix": f"{a}_",
                              "pos": [0.0, k * 0.8, 0.0]} for k, a in enumerate(("left", "right"))],
                  "floor": True}}))
    robot_config(tmp_path)   # writes the arms' files
    import time
    start = time.time() + 3.0   # every process imports first, then all begin at once
    code = ("import logging, sys, time\n"
            "logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
            "from mj_manipulator_ros.core.config import load_config\n"
            "from mj_manipulator_ros.model.allowed_collisions import generate\n"
            "from mj_manipulator_ros.model.scene import scene_for\n"
            f"scene = scene_for(load_config({str(cfg)!r}))\n"
            f"time.sleep(max(0.0, {start} - time.time()))\n"
            "acm = generate(scene.model, scene.arms, scene.initial_qpos, 0.005)\n"
            "print('MATRIX', acm.fingerprint, len(acm.pairs), flush=True)\n")
    env = {**__import__("os").environ, "MJ_MANIPULATOR_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env) for _ in range(3)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    matrices = {line for out in outs for line in out.splitlines() if line.startswith("MATRIX")}
    assert len(matrices) == 1, matrices
    generated = sum(out.count("generating the allowed-collision matrix") for out in outs)
    assert generated == 1, f"{generated} of 3 processes generated the matrix:\n" + "\n".join(outs)
