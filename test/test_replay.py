"""The plan-replay checker: modes, attribution, MuJoCo's filters, the continuous check (with a
brute-force reference), the CLI, and the executor's pre-flight gate."""

from __future__ import annotations

import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest
import yaml

from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import save_plan
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.check.timeline import build_timeline, load_recording, timeline_from_recording
from mj_manipulator_ros.model.scene import scene_for
from tiny_arm import ARM_XML

POLE_XML = """<mujoco><worldbody>
  <geom name="pole" type="capsule" fromto="0.3 0 0.4 0.3 0 0.6" size="0.003"/>
</worldbody></mujoco>"""
THIN_ARM_XML = ARM_XML.replace('size="0.03"', 'size="0.003"')


def scene_config(tmp_path, separation=0.4, thin=False, pole=False, exclude=False):
    arm = tmp_path / "arm.xml"
    xml = THIN_ARM_XML if thin else ARM_XML
    arm.write_text(xml)
    models = [{"file": str(arm), "prefix": "left_", "pos": [0, 0, 0.5]},
              {"file": str(arm), "prefix": "right_", "pos": [0, separation, 0.5]}]
    if pole:
        (tmp_path / "pole.xml").write_text(POLE_XML)
        models.append({"file": str(tmp_path / "pole.xml"), "prefix": "env_"})
    data = {"arms": [{"name": a, "joint_names": [f"{a}_j1", f"{a}_j2"]} for a in ("left", "right")],
            "scene": {"models": models, "floor": False}}
    return config_from_mapping(data)


def checker_for(config, **kw):
    scene = scene_for(config)
    return PlanReplayChecker.from_scene(scene, **kw), scene


def plan_of(left, right, times):
    return MultiArmPlan({
        "left": ArmTrajectory(("left_j1", "left_j2"), times, np.asarray(left, float)),
        "right": ArmTrajectory(("right_j1", "right_j2"), times, np.asarray(right, float))})


# Left swings toward the right arm's base (+y) while the right arm swings away, or not.
T = np.linspace(0, 2, 21)
SWING = np.stack([np.linspace(0, 1.4, 21), np.zeros(21)], 1)
AWAY = np.stack([np.linspace(0, 1.4, 21), np.zeros(21)], 1)     # right turns the same way: +y
STILL = np.zeros((21, 2))


def test_synchronized_clear_sequential_collides(tmp_path) -> None:
    checker, _ = checker_for(scene_config(tmp_path))
    plan = plan_of(SWING, AWAY, T)
    sync = checker.check(plan)
    assert sync.collision_free and sync.states_checked == 21
    seq = checker.check(plan, mode="sequential")
    assert seq.colliding_states > 0
    pair = seq.pairs[0]
    assert set(pair.arms) == {"left", "right"}
    assert pair.bodies[0].startswith("left_") and pair.bodies[1].startswith("right_")
    assert seq.first_collision_time is not None and 0 < seq.first_collision_time <= 2.0
    assert seq.min_clearance["left-right"]["distance"] < 0


def test_timelines() -> None:
    plan = plan_of(SWING, AWAY, T)
    seq = build_timeline(plan, "sequential")
    assert seq.times[-1] == pytest.approx(4.0)
    k = int(np.argmin(np.abs(seq.times - 1.0)))
    assert np.allclose(seq.positions["right"][k], AWAY[0])   # not started: first pose
    k = int(np.argmin(np.abs(seq.times - 3.0)))
    assert np.allclose(seq.positions["left"][k], SWING[-1])  # finished: last pose
    skew = build_timeline(plan, "skewed", skews={"right": 0.5})
    assert skew.times[-1] == pytest.approx(2.5)
    k = int(np.argmin(np.abs(skew.times - 0.5)))
    assert np.allclose(skew.positions["right"][k], AWAY[0])
    with pytest.raises(Exception, match=r"unknown arm\(s\) \['middle'\]"):
        build_timeline(plan, "skewed", skews={"middle": 0.1})


def test_start_skew_sensitivity(tmp_path) -> None:
    """Arms chasing each other collide when the leading arm starts late."""
    checker, _ = checker_for(scene_config(tmp_path))
    plan = plan_of(SWING, AWAY, T)
    assert checker.check(plan, mode="skewed", skews={"right": 0.0}).collision_free
    assert not checker.check(plan, mode="skewed", skews={"right": 1.0}).collision_free


def test_thin_fast_link_missed_by_discrete_found_by_continuous(tmp_path) -> None:
    checker, _ = checker_for(scene_config(tmp_path, separation=3.0, thin=True, pole=True),
                             arm_env=True)
    # One step of 0.6 rad: the 3 mm link jumps over the 3 mm pole at angle 0.
    left = [[-0.3, 0.0], [0.3, 0.0]]
    plan = plan_of(left, [[0, 0], [0, 0]], [0.0, 0.01])
    discrete = checker.check(plan, continuous=False)
    assert discrete.collision_free, "the discrete check should miss it (that is the point)"
    cont = checker.check(plan, continuous=True)
    assert not cont.collision_free and cont.between_state_collisions >= 1
    assert cont.pairs[0].geoms[1] == "env_pole" or "pole" in "".join(cont.pairs[0].geoms)
    assert cont.extra_states_checked >= 1


def test_arm_environment_by_default_and_off_only_when_asked(tmp_path) -> None:
    cfg = scene_config(tmp_path, separation=3.0, pole=True)
    plan = plan_of([[0, 0], [0, 0]], [[0, 0], [0, 0]], [0.0, 1.0])  # left's link lies on the pole
    report = checker_for(cfg)[0].check(plan)
    assert not report.collision_free
    assert report.pairs and all(p.arms == ("left", "environment") and p.geoms[1] == "env_pole"
                                for p in report.pairs)
    assert checker_for(cfg, arm_env=False)[0].check(plan).collision_free


def test_mujoco_filters_are_respected(tmp_path) -> None:
    """contype/conaffinity = 0 on the right arm: its geoms collide with nothing."""
    checker, scene = checker_for(scene_config(tmp_path))
    plan = plan_of(SWING, STILL, T)
    assert not checker.check(plan).collision_free
    m = scene.model
    right = [g for g in range(m.ngeom) if m.body(m.geom_bodyid[g]).name.startswith("right_")]
    m.geom_contype[right] = 0
    m.geom_conaffinity[right] = 0
    assert PlanReplayChecker.from_scene(scene).check(plan).collision_free


def brute_force_min_distance(checker, plan, per_second=2000) -> float:
    """Slow reference: min arm-arm distance over a dense sampling of the true motion."""
    m = checker.model
    d = mujoco.MjData(m)
    tl = build_timeline(plan, "synchronized")
    best = np.inf
    owner = np.asarray([checker.geom_owner[g] for g in range(m.ngeom)])
    adr = {name: np.asarray(arm.qpos_adr) for name, arm in checker.arms.items()}
    d.qpos[:] = checker.base_qpos
    for t in np.linspace(0, tl.times[-1], int(tl.times[-1] * per_second) + 1):
        for name, q in tl.pose_at(t).items():
            d.qpos[adr[name]] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        if d.ncon:
            a, b = owner[d.contact.geom1], owner[d.contact.geom2]
            dist = d.contact.dist[(a != b) & (a >= 0) & (b >= 0)]
            best = min(best, float(dist.min())) if dist.size else best
    return best


def agree_with_reference(report, reference: float, margin: float, counts: dict) -> None:
    """The checker's verdict against a brute-force minimum distance (both ways), counted."""
    if report.collision_free:
        counts["clear"] += 1
        assert reference >= margin, (report.summary(), reference)
    if reference < margin:
        counts["colliding"] += 1
        assert not report.collision_free, (report.summary(), reference)


@pytest.mark.parametrize("with_velocities, seed", [(False, 11), (True, 2)])
def test_continuous_guarantee_against_brute_force(tmp_path, with_velocities, seed) -> None:
    """Random plans of arms reaching toward each other, few waypoints (big steps): whenever the
    checker certifies a plan clear, a dense brute-force sampling of the true motion agrees; and
    when the brute force finds contact, the checker does too. Both verdicts must occur."""
    checker, _ = checker_for(scene_config(tmp_path, separation=1.05))
    rng = np.random.default_rng(seed)  # seeds chosen so that both verdicts occur
    counts = {"clear": 0, "colliding": 0}
    for _ in range(12):
        times = np.linspace(0, 1, 4)
        left = np.stack([rng.uniform(0.0, 1.3, 4), rng.uniform(-1, 1, 4)], 1)
        right = np.stack([rng.uniform(-1.3, 0.0, 4), rng.uniform(-1, 1, 4)], 1)
        vel = (lambda q: np.vstack([np.zeros(2), rng.uniform(-1, 1, (2, 2)), np.zeros(2)]))
        plan = MultiArmPlan({
            "left": ArmTrajectory(("left_j1", "left_j2"), times, left,
                                  vel(left) if with_velocities else None),
            "right": ArmTrajectory(("right_j1", "right_j2"), times, right,
                                   vel(right) if with_velocities else None)})
        report = checker.check(plan)
        agree_with_reference(report, brute_force_min_distance(checker, plan), checker.margin, counts)
    assert counts["clear"] >= 1 and counts["colliding"] >= 1, counts


def test_recorded_mode(tmp_path) -> None:
    rec = tmp_path / "rec.jsonl"
    lines = []
    for k, t in enumerate(T):
        lines.append(json.dumps({"t": 100 + t, "name": ["left_j1", "left_j2"], "position": SWING[k].tolist()}))
        lines.append(json.dumps({"t": 100 + t, "name": ["right_j1", "right_j2"], "position": STILL[k].tolist()}))
    rec.write_text("\n".join(lines) + "\n")
    recording = load_recording(rec)
    assert recording.names == ("left_j1", "left_j2", "right_j1", "right_j2")
    tl = timeline_from_recording(recording, {"left": ["left_j1", "left_j2"],
                                             "right": ["right_j1", "right_j2"]})
    checker, _ = checker_for(scene_config(tmp_path))
    report = checker.check(timeline=tl, mode="recorded")
    assert not report.collision_free and report.mode == "recorded"


CLI = [sys.executable, "-m", "mj_manipulator_ros.cli", "check-plan"]


def write_files(tmp_path, plan):
    cfg = scene_config(tmp_path)
    data = {"arms": [{"name": a.name, "joint_names": list(a.joint_names)} for a in cfg.arms],
            "scene": cfg.extra["scene"]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    save_plan(plan, tmp_path / "p.yaml")
    return str(tmp_path / "p.yaml"), str(tmp_path / "c.yaml")


@pytest.mark.parametrize("mode, code", [("synchronized", 0), ("sequential", 1)])
def test_cli_exit_codes_json_and_pictures(tmp_path, mode, code) -> None:
    plan, cfg = write_files(tmp_path, plan_of(SWING, AWAY, T))
    image, graph = tmp_path / "worst.png", tmp_path / "clearance.png"
    out = subprocess.run([*CLI, plan, "--config", cfg, "--mode", mode, "--json",
                          "--image", str(image), "--plot", str(graph)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == code, out.stderr
    doc = json.loads(out.stdout)
    assert {"mode", "states_checked", "colliding_states", "first_collision_time", "pairs",
            "min_clearance", "continuous"} <= set(doc)
    assert doc["mode"] == mode and doc["continuous"] is True
    for p in doc["pairs"]:
        assert {"arms", "bodies", "geoms", "max_penetration"} <= set(p)
    for png in (image, graph):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_cli_bad_input_exits_2(tmp_path) -> None:
    plan, cfg = write_files(tmp_path, plan_of(SWING, AWAY, T))
    out = subprocess.run([*CLI, plan, "--config", cfg, "--skew", "left=soon", "--mode", "skewed"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "expected ARM=SECONDS" in out.stderr
    out = subprocess.run([*CLI, str(tmp_path / "nope.yaml"), "--config", cfg],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "cannot read plan file" in out.stderr


def test_preflight_refuses_colliding_plan_and_sends_nothing(tmp_path, ros, scripted) -> None:
    from mj_manipulator_ros.check.preflight import PlanRefused, preflight_for
    from mj_manipulator_ros.ros.executor import MultiArmExecutor

    ctl = scripted({"left": "succeed", "right": "succeed"})
    cfg = scene_config(tmp_path)
    cfg = config_from_mapping({"arms": [{"name": a.name, "joint_names": list(a.joint_names)}
                                        for a in cfg.arms],
                               "execution": {"preflight_check": True, "stop_skew_s": 0.25,
                                             "start_tolerance_rad": 0.0, "max_clock_offset_s": 0.0},
                               "scene": cfg.extra["scene"]})
    with MultiArmExecutor(cfg, context=ros.context, preflight=preflight_for(cfg)) as executor:
        with pytest.raises(PlanRefused, match="collides when replayed synchronized") as info:
            executor.execute(plan_of(SWING, STILL, T))
        assert info.value.report.colliding_states > 0
        # clear on time, but the left arm swings into where the right arm was a moment
        # earlier: refused once arms that stop apart must be safe too (the stop band)
        with pytest.raises(PlanRefused, match="ms apart in plan time") as info:
            executor.execute(plan_of(SWING, AWAY, T).time_scaled(2.0))
        b = info.value.report.band_collision
        assert b["arms"] == ["left", "right"] and f"{b['t1']:.3f} s" in str(info.value)
        assert not ctl["left"].goals        # refused: nothing was sent
        ok = executor.execute(plan_of(-SWING, AWAY, T).time_scaled(2.0))  # apart, both ways
    assert len(ctl["left"].goals) == 1  # only the clear plan was sent
    assert ok.succeeded, ok.summary()


def test_timeline_with_holds() -> None:
    plan = plan_of(SWING, AWAY, T)
    tl = build_timeline(plan.subset(["left"]), "synchronized").with_holds({"right": np.array([0.3, -0.2])})
    assert np.allclose(tl.positions["right"], [0.3, -0.2]) and tl.positions["right"].shape == (21, 2)
    assert np.allclose(tl.pose_at(0.75)["right"], [0.3, -0.2])
    assert np.allclose(tl.pose_at(0.75)["left"], build_timeline(plan, "synchronized").pose_at(0.75)["left"])
    assert np.all(tl.speed_bound(0.0, 1.0)["right"] == 0.0)


def test_concurrent_checks_give_the_serial_verdicts(tmp_path) -> None:
    """Two threads check on one checker at once, in different modes (continuous and discrete
    use different copies of the model): every verdict equals the serial one (regression: the
    checker swapped its model/data per call, so concurrent checks shared one MjData)."""
    import threading

    checker, _ = checker_for(scene_config(tmp_path))
    jobs = [(plan_of(SWING, STILL, T), True), (plan_of(SWING, AWAY, T), False),
            (plan_of(SWING, STILL, T), False), (plan_of(SWING, AWAY, T), True)]
    serial = [checker.check(p, continuous=c).to_dict() for p, c in jobs]
    assert {s["colliding_states"] > 0 for s in serial} == {True, False}
    seen, errors = [], []

    def worker(k: int) -> None:
        try:
            for _ in range(15):
                p, c = jobs[k]
                seen.append((k, checker.check(p, continuous=c).to_dict()))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    bad = [k for k, d in seen if d != serial[k]]
    assert not bad and len(seen) == 15 * len(jobs), f"{len(bad)} of {len(seen)} verdicts differ"


def test_the_margin_rule_is_verified_when_a_checker_is_built(tmp_path, monkeypatch) -> None:
    """The checker's distance horizon needs MuJoCo to sum the two geoms' margins; a MuJoCo that
    does not is refused with a clear error (shown here with a probe whose gap no rule bridges)."""
    import mj_manipulator_ros.check.replay_checker as rc
    from mj_manipulator_ros.core.errors import UnsupportedMujocoError

    checker_for(scene_config(tmp_path))  # this MuJoCo sums: built
    monkeypatch.setattr(rc, "_margin_rule_checked", False)
    monkeypatch.setattr(rc, "_MARGIN_PROBE", rc._MARGIN_PROBE.replace('pos="0.3 0 0"',
                                                                      'pos="0.5 0 0"'))
    with pytest.raises(UnsupportedMujocoError, match="needs the sum of the two margins"):
        checker_for(scene_config(tmp_path))


def crowded_checker(geom: str, count: int, memory: str, **kwargs) -> PlanReplayChecker:
    """Two one-joint arms 2 cm apart, each ``count`` overlapping copies of ``geom`` 1 cm apart,
    in an arena of ``memory`` (MuJoCo's ``<size memory>``): contacts beyond what it holds."""
    import mujoco

    from mj_manipulator_ros.model.arm_binding import bind_arm

    def arm(name: str, y: float) -> str:
        geoms = "".join(geom.replace("/>", f' pos="{0.01 * i} 0 0"/>') for i in range(count))
        return f'<body name="{name}" pos="0 {y} 0"><joint name="{name}_j1" axis="0 0 1"/>{geoms}</body>'
    model = mujoco.MjModel.from_xml_string(
        f'<mujoco><size memory="{memory}"/><worldbody>{arm("left", 0)}{arm("right", 0.02)}'
        "</worldbody></mujoco>")
    cfg = config_from_mapping({"arms": [{"name": a, "joint_names": [f"{a}_j1"]}
                                        for a in ("left", "right")]})
    return PlanReplayChecker(model, {a.name: bind_arm(model, a) for a in cfg.arms}, model.qpos0,
                             **kwargs)


#: the arms of crowded_checker that fill a 300K arena's contact buffer
BALLS = ('<geom type="sphere" size="0.05"/>', 40, "300K")


def test_a_full_contact_buffer_is_never_clear() -> None:
    """Arms made of many overlapping spheres in a tiny arena: MuJoCo drops contacts; those
    states are counted and the replay is not certified."""
    checker = crowded_checker(*BALLS)
    t = np.array([0.0, 1.0])
    plan = MultiArmPlan({a: ArmTrajectory((f"{a}_j1",), t, np.zeros((2, 1))) for a in ("left", "right")})
    report = checker.check(plan, continuous=False)
    assert report.contact_overflow_states > 0 and not report.collision_free
    assert "contact buffer filled up" in report.summary()


# ---- the certificate follows the kinematic tree, not the listing order ----------------------
ARM3_XML = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="base"><joint name="j1" type="hinge" axis="0 0 1" range="-3 3"/>
    <geom type="capsule" fromto="0 0 0 0 0 0.2" size="0.02"/>
    <body name="l2" pos="0 0 0.2"><joint name="j2" type="hinge" axis="0 1 0" range="-2 2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.015"/>
      <body name="l3" pos="0.3 0 0"><joint name="j3" type="hinge" axis="0 0 1" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.004"/>
      </body></body></body></worldbody></mujoco>"""
RAIL_XML = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="carriage"><joint name="rail" type="slide" axis="1 0 0" range="-0.5 0.5"/>
    <geom type="box" size="0.03 0.03 0.01"/>
    <body name="link" pos="0 0 0.02"><joint name="j1" type="hinge" axis="0 0 1" range="-3 3"/>
      <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.003"/>
    </body></body></worldbody></mujoco>"""
PERMUTATIONS = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


def arm3_config(tmp_path, order, separation=0.95):
    (tmp_path / "arm3.xml").write_text(ARM3_XML)
    joints = ("j1", "j2", "j3")
    models = [{"file": str(tmp_path / "arm3.xml"), "prefix": "left_", "pos": [0, 0, 0.5]},
              {"file": str(tmp_path / "arm3.xml"), "prefix": "right_", "pos": [separation, 0, 0.5],
               "quat": [0, 0, 0, 1]}]
    return config_from_mapping({
        "arms": [{"name": a, "joint_names": [f"{a}_{joints[k]}" for k in order]}
                 for a in ("left", "right")],
        "scene": {"models": models, "floor": False}})


def arm3_plan(canonical: dict, times, order) -> MultiArmPlan:
    """The same motion (columns j1, j2, j3 in ``canonical``) listed in ``order``."""
    joints = ("j1", "j2", "j3")
    return MultiArmPlan({a: ArmTrajectory(tuple(f"{a}_{joints[k]}" for k in order), times,
                                          q[:, list(order)]) for a, q in canonical.items()})


def test_thin_link_sweep_is_found_in_any_joint_order(tmp_path) -> None:
    """The 3 mm link jumps over the 3 mm pole between two states 10 ms apart. Listing the joints
    [j2, j1] must not hide it (regression: the reach bound assumed chain order and certified
    the interval)."""
    for order in (("left_j1", "left_j2"), ("left_j2", "left_j1")):
        cfg = scene_config(tmp_path, separation=3.0, thin=True, pole=True)
        # the pole stands on the second link's path only (0.45 m out): j1 swings link2 into it
        (tmp_path / "pole.xml").write_text(POLE_XML.replace('fromto="0.3 0 0.4 0.3 0 0.6"',
                                                            'fromto="0.45 0 0.4 0.45 0 0.6"'))
        data = {"arms": [{"name": "left", "joint_names": list(order)},
                         {"name": "right", "joint_names": ["right_j1", "right_j2"]}],
                "scene": cfg.extra["scene"]}
        checker, _ = checker_for(config_from_mapping(data), arm_env=True)
        left = np.array([[-0.3, 0.0], [0.3, 0.0]])[:, [0, 1] if order[0] == "left_j1" else [1, 0]]
        plan = MultiArmPlan({"left": ArmTrajectory(order, np.array([0.0, 0.01]), left),
                             "right": ArmTrajectory(("right_j1", "right_j2"), np.array([0.0, 0.01]),
                                                    np.zeros((2, 2)))})
        assert checker.check(plan, continuous=False).collision_free  # the states miss it
        report = checker.check(plan)
        assert not report.collision_free and report.between_state_collisions >= 1, (order, report.summary())


def test_every_joint_order_gives_the_same_certificate(tmp_path) -> None:
    """Random 3-joint plans in all six orders of joint_names: the same verdict and the same
    number of extra states every time, and each verdict agrees with a dense brute-force
    sampling of the true motion (both verdicts occur)."""
    checkers = {o: checker_for(arm3_config(tmp_path, o))[0] for o in PERMUTATIONS}
    rng = np.random.default_rng(5)
    times = np.linspace(0.0, 1.0, 4)
    counts = {"clear": 0, "colliding": 0}
    for _ in range(10):
        canonical = {"left": np.column_stack([rng.uniform(-0.6, 0.6, 4), rng.uniform(-0.5, 0.5, 4),
                                              rng.uniform(-1.5, 1.5, 4)]),
                     "right": np.column_stack([rng.uniform(-0.6, 0.6, 4), rng.uniform(-0.5, 0.5, 4),
                                               rng.uniform(-1.5, 1.5, 4)])}
        verdicts = {o: checkers[o].check(arm3_plan(canonical, times, o)) for o in PERMUTATIONS}
        base = verdicts[PERMUTATIONS[0]]
        for o, r in verdicts.items():
            assert (r.collision_free, r.extra_states_checked, r.colliding_states) == \
                (base.collision_free, base.extra_states_checked, base.colliding_states), o
        reference = brute_force_min_distance(checkers[PERMUTATIONS[0]],
                                             arm3_plan(canonical, times, PERMUTATIONS[0]))
        agree_with_reference(base, reference, base.margin, counts)
    assert counts["clear"] >= 1 and counts["colliding"] >= 1, counts


def test_an_arm_on_a_rail_is_certified_soundly(tmp_path) -> None:
    """A slide joint (a carriage on a rail) carries a thin link past a thin pole between two
    states: the slide's bound is translational (1 m per m) and the sweep is found; the same
    motion listed [j1, rail] too. A slide without a range is refused."""
    (tmp_path / "rail.xml").write_text(RAIL_XML)
    (tmp_path / "pole.xml").write_text(POLE_XML.replace('fromto="0.3 0 0.4 0.3 0 0.6"',
                                                        'fromto="0 0.2 0.4 0 0.2 0.6"'))
    scene = {"models": [{"file": str(tmp_path / "rail.xml"), "prefix": "left_", "pos": [0, 0, 0.5]},
                        {"file": str(tmp_path / "rail.xml"), "prefix": "right_", "pos": [0, 3, 0.5]},
                        {"file": str(tmp_path / "pole.xml"), "prefix": "env_"}], "floor": False}
    for order in (("left_rail", "left_j1"), ("left_j1", "left_rail")):
        cfg = config_from_mapping({"arms": [{"name": "left", "joint_names": list(order)},
                                            {"name": "right", "joint_names": ["right_rail", "right_j1"]}],
                                   "scene": scene})
        checker, _ = checker_for(cfg, arm_env=True)
        t = np.array([0.0, 0.01])
        rail = np.array([-0.2, 0.2])                 # 0.4 m in 10 ms, across the pole at x = 0
        left = np.column_stack([rail, np.zeros(2)]) if order[0] == "left_rail" else \
            np.column_stack([np.zeros(2), rail])
        plan = MultiArmPlan({"left": ArmTrajectory(order, t, left),
                             "right": ArmTrajectory(("right_rail", "right_j1"), t, np.zeros((2, 2)))})
        assert checker.check(plan, continuous=False).collision_free  # the states miss it
        report = checker.check(plan)
        assert not report.collision_free and report.between_state_collisions >= 1, report.summary()
    from mj_manipulator_ros.core.errors import ConfigError

    (tmp_path / "rail.xml").write_text(RAIL_XML.replace(' range="-0.5 0.5"', ""))
    cfg = config_from_mapping({"arms": [{"name": "left", "joint_names": ["left_rail", "left_j1"]},
                                        {"name": "right", "joint_names": ["right_rail", "right_j1"]}],
                               "scene": scene})
    with pytest.raises(ConfigError, match="slide joint 'left_rail' has no range"):
        checker_for(cfg)


# ---- the stop band -----------------------------------------------------------------------------
def brute_force_band(checker, plan, skew, step=0.0025) -> tuple[float, tuple]:
    """Slow reference: min arm-arm distance over a dense grid of (t1, t2), |t1 - t2| <= skew
    (MuJoCo's own collision pass at every grid state; the contacts read as arrays)."""
    m = checker.model
    d = mujoco.MjData(m)
    owner = np.asarray([checker.geom_owner[g] for g in range(m.ngeom)])
    left_adr = np.asarray(checker.arms["left"].qpos_adr)
    right_adr = np.asarray(checker.arms["right"].qpos_adr)
    duration = plan.duration
    best, where = np.inf, None
    from mj_manipulator_ros.core.interpolation import sample as sample_plan
    t1s = np.arange(0.0, duration + step / 2, step)
    d.qpos[:] = checker.base_qpos
    for delta in np.arange(-skew, skew + step / 2, step):
        left = sample_plan(plan["left"], t1s)[0]
        right = sample_plan(plan["right"], np.clip(t1s + delta, 0.0, duration))[0]
        for k, t in enumerate(t1s):
            d.qpos[left_adr] = left[k]
            d.qpos[right_adr] = right[k]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_collision(m, d)
            if not d.ncon:
                continue
            a, b = owner[d.contact.geom1], owner[d.contact.geom2]
            dist = d.contact.dist[(a != b) & (a >= 0) & (b >= 0)]
            if dist.size and dist.min() < best:
                best, where = float(dist.min()), (float(t), float(t + delta))
    return best, where


def test_band_of_zero_is_the_synchronized_replay(tmp_path) -> None:
    checker, _ = checker_for(scene_config(tmp_path))
    for plan in (plan_of(SWING, STILL, T), plan_of(SWING, AWAY, T)):
        sync = checker.check(plan)
        band = checker.check(plan, mode="band", skew=0.0)
        assert band.collision_free == sync.collision_free
        assert band.colliding_states == sync.colliding_states and band.skew == 0.0


#: the plan times of the arms taking turns below
TURNS_T = np.linspace(0.0, 1.0, 41)


def out_and_back(t0: float, amplitude: float) -> np.ndarray:
    """The first joint out by ``amplitude`` rad and back over 0.4 s from ``t0`` (on TURNS_T)."""
    s = np.clip((TURNS_T - t0) / 0.4, 0.0, 1.0)
    return np.column_stack([amplitude * np.sin(np.pi * s) ** 2, np.zeros_like(TURNS_T)])


def test_a_plan_clear_on_time_collides_in_the_band(tmp_path) -> None:
    """The arms take turns: the left swings toward the right arm and back, then the right toward
    the left and back. On time they never meet; if one stops 0.4 s off the other's plan time
    they do. The band replay finds it (the brute force agrees) and names the pair and times."""
    checker, _ = checker_for(scene_config(tmp_path, separation=0.55))
    t = TURNS_T
    plan = plan_of(out_and_back(0.1, 0.8), out_and_back(0.5, -0.8), t)
    assert checker.check(plan).collision_free
    assert brute_force_band(checker, plan, 0.0, step=0.005)[0] >= checker.margin
    band = checker.check(plan, mode="band", skew=0.4)
    reference, where = brute_force_band(checker, plan, 0.4, step=0.01)
    assert reference < checker.margin and not band.collision_free, (band.summary(), where)
    b = band.band_collision
    assert b["arms"] == ["left", "right"] and abs(b["t1"] - b["t2"]) <= 0.4 + 1e-9
    assert "collide" in band.summary() and band.to_dict()["skew"] == 0.4


@pytest.mark.parametrize("seed", [3, 8])
def test_band_certificate_against_brute_force(tmp_path, seed) -> None:
    """Random plans, skew 0.1 s: whenever the band replay certifies clear, a dense brute-force
    sampling of the band agrees; whenever the brute force finds contact, the band replay does
    too. Both verdicts occur."""
    checker, _ = checker_for(scene_config(tmp_path, separation=1.05))
    rng = np.random.default_rng(seed)
    counts = {"clear": 0, "colliding": 0}
    for _ in range(5):
        times = np.linspace(0, 1, 5)
        left = np.stack([rng.uniform(0.0, 1.3, 5), rng.uniform(-1, 1, 5)], 1)
        right = np.stack([rng.uniform(-1.3, 0.0, 5), rng.uniform(-1, 1, 5)], 1)
        plan = plan_of(left, right, times)
        report = checker.check(plan, mode="band", skew=0.1)
        reference, _ = brute_force_band(checker, plan, 0.1, step=0.004)
        agree_with_reference(report, reference, checker.margin, counts)
    assert counts["clear"] >= 1 and counts["colliding"] >= 1, counts


@pytest.mark.parametrize("seed", [1, 9])
def test_the_band_refined_where_needed_reaches_the_whole_grids_verdict(tmp_path, seed) -> None:
    """The band is sampled coarse in skew and refined cell by cell only where a cell is not
    certified. Random plans (2 s, 81 waypoints through 5 random knots) in a band four coarse
    cells wide (skew 0.8 s): its verdict is the whole grid's (every skew sample at the finest
    step: ``coarse_step = delta_step``, as the band was checked before) and the brute force's,
    from no more states; where it refuses, the colliding plan times it names are within the
    skew. Both verdicts occur, and the refinement skips states in some plan."""
    from mj_manipulator_ros.check.band import DELTA_STEP_S, check_band

    checker, _ = checker_for(scene_config(tmp_path, separation=1.05))
    rng = np.random.default_rng(seed)
    times, knots = np.linspace(0.0, 2.0, 81), np.linspace(0.0, 2.0, 5)

    def through_knots(lo: float, hi: float) -> np.ndarray:
        q = np.stack([rng.uniform(lo, hi, 5), rng.uniform(-1, 1, 5)], 1)
        return np.column_stack([np.interp(times, knots, q[:, j]) for j in range(2)])

    counts = {"clear": 0, "colliding": 0}
    fewer = 0
    for _ in range(5):
        plan = plan_of(through_knots(0.0, 1.3), through_knots(-1.3, 0.0), times)
        report = checker.check(plan, mode="band", skew=0.8)
        with checker._lock:
            checker.model, checker.data, checker._reach_now = checker._models["pairs"]
            whole = check_band(checker, plan, 0.8, coarse_step=DELTA_STEP_S)
        assert report.collision_free == whole.collision_free, (report.summary(), whole.summary())
        assert report.states_checked <= whole.states_checked
        fewer += report.states_checked < whole.states_checked
        reference, _ = brute_force_band(checker, plan, 0.8, step=0.01)
        agree_with_reference(report, reference, checker.margin, counts)
        if report.band_collision:
            b = report.band_collision
            assert abs(b["t1"] - b["t2"]) <= 0.8 + 1e-9, b
    assert counts["clear"] >= 1 and counts["colliding"] >= 1, counts
    assert fewer >= 1


def test_a_grazing_contact_between_every_sample_of_the_band_is_refused(tmp_path) -> None:
    """Adversarial to sampling the band coarse: both arms rest at every waypoint (0.2 s apart)
    and swing toward each other only between waypoints (velocities at the waypoints), the left
    around plan time 0.3 s, the right around 0.9 s. On time they never meet; 0.6 s apart they
    graze (the brute force: closer than the margin, by under 2 mm), at plan times no grid state
    of the band has. Only the cells' certificate can find it: the band replay refuses."""
    checker, _ = checker_for(scene_config(tmp_path, separation=0.55))
    t = np.linspace(0.0, 1.6, 9)
    v_left, v_right = np.zeros((9, 2)), np.zeros((9, 2))
    v_left[1, 0], v_left[2, 0] = 9.16, -9.16
    v_right[4, 0], v_right[5, 0] = -9.16, 9.16
    rest = np.zeros((9, 2))
    plan = MultiArmPlan({"left": ArmTrajectory(("left_j1", "left_j2"), t, rest, v_left),
                         "right": ArmTrajectory(("right_j1", "right_j2"), t, rest, v_right)})
    reference, where = brute_force_band(checker, plan, 0.8, step=0.005)
    assert checker.margin - 0.002 < reference < checker.margin, (reference, where)  # grazing
    assert abs(where[1] - where[0] - 0.6) < 0.05, where
    assert checker.check(plan).collision_free
    band = checker.check(plan, mode="band", skew=0.8)
    assert not band.collision_free and band.colliding_states == 0, band.summary()
    assert band.band_collision["arms"] == ["left", "right"], band.band_collision


def test_the_band_takes_its_diagonal_from_the_synchronized_replay(tmp_path) -> None:
    """The band's states at d = 0 are the synchronized replay's (the same poses, the same
    arm-arm geoms): given that replay's report, the band's report is the same field for field
    with them taken from it; a report of another plan, of the same plan with the grippers
    elsewhere, or one that found a contact, is not used (the band evaluates them itself)."""
    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.resources import config_file, share_dir

    openarm = PlanReplayChecker.from_scene(scene_for(load_config(config_file("sim_openarm.yaml"))))
    plan = load_plan(share_dir() / "config/plans/openarm_wave.yaml")
    sync = openarm.check(plan)
    assert openarm._diagonal(sync, plan, {}) is not None
    alone = openarm.check(plan, mode="band", skew=0.5)
    taken = openarm.check(plan, mode="band", skew=0.5, diagonal=openarm.check(plan))
    assert taken.to_dict() == alone.to_dict() and taken.states_checked > plan["left"].times.size
    other = MultiArmPlan(dict(plan.arms))   # the same trajectories, another plan object
    assert openarm._diagonal(sync, other, {}) is None
    assert openarm._diagonal(openarm.check(plan), plan, {"left_gripper": 0.01}) is None
    checker, _ = checker_for(scene_config(tmp_path))
    colliding = plan_of(SWING, STILL, T)
    report = checker.check(colliding)
    assert not report.collision_free and checker._diagonal(report, colliding, {}) is None


@pytest.mark.parametrize("separation", [0.55, 1.05])
def test_the_band_beside_an_arm_that_holds_is_the_synchronized_replay(tmp_path, separation) -> None:
    """One arm swings, the other holds one pose all along: every pair of plan times within the
    skew is a state of the synchronized replay, so the band checks no more states than it and
    reaches the same verdict, which a brute-force sampling of the band confirms."""
    checker, _ = checker_for(scene_config(tmp_path, separation=separation))
    plan = plan_of(SWING, STILL, T)
    sync = checker.check(plan)
    band = checker.check(plan, mode="band", skew=0.4)
    reference, _ = brute_force_band(checker, plan, 0.4, step=0.02)
    counts = {"clear": 0, "colliding": 0}
    agree_with_reference(band, reference, checker.margin, counts)
    assert band.collision_free == sync.collision_free
    assert band.states_checked == sync.states_checked, (band.summary(), sync.summary())
    assert band.skew == 0.4


def test_an_arm_that_moves_between_equal_waypoints_gets_the_whole_band(tmp_path) -> None:
    """Adversarial to the still-arm shortcut: the right arm's waypoints are all one pose but it
    passes through them with velocity (a spline that swings out and back between them): it is
    not still, and its pair is sampled across the whole skew, as the brute force does."""
    checker, _ = checker_for(scene_config(tmp_path, separation=0.55))
    v = np.zeros((21, 2))
    v[5:16, 0] = -1.5
    plan = MultiArmPlan({
        "left": ArmTrajectory(("left_j1", "left_j2"), T, np.asarray(SWING, float)),
        "right": ArmTrajectory(("right_j1", "right_j2"), T, np.zeros((21, 2)), v)})
    sync = checker.check(plan)
    band = checker.check(plan, mode="band", skew=0.4)
    assert band.states_checked > sync.states_checked, band.summary()
    reference, _ = brute_force_band(checker, plan, 0.4, step=0.02)
    agree_with_reference(band, reference, checker.margin, {"clear": 0, "colliding": 0})
