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


def test_arm_environment_only_on_request(tmp_path) -> None:
    cfg = scene_config(tmp_path, separation=3.0, pole=True)
    plan = plan_of([[0, 0], [0, 0]], [[0, 0], [0, 0]], [0.0, 1.0])  # left's link lies on the pole
    assert checker_for(cfg)[0].check(plan).collision_free
    assert not checker_for(cfg, arm_env=True)[0].check(plan).collision_free


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
    owner = checker.geom_owner
    for t in np.linspace(0, tl.times[-1], int(tl.times[-1] * per_second) + 1):
        d.qpos[:] = checker.base_qpos
        for name, q in tl.pose_at(t).items():
            d.qpos[checker.arms[name].qpos_adr] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        for c in d.contact[:d.ncon]:
            a, b = owner[c.geom1], owner[c.geom2]
            if a != b and a >= 0 and b >= 0:
                best = min(best, c.dist)
    return best


@pytest.mark.parametrize("with_velocities, seed", [(False, 11), (True, 2)])
def test_continuous_guarantee_against_brute_force(tmp_path, with_velocities, seed) -> None:
    """Random plans of arms reaching toward each other, few waypoints (big steps): whenever the
    checker certifies a plan clear, a dense brute-force sampling of the true motion agrees; and
    when the brute force finds contact, the checker does too. Both verdicts must occur."""
    checker, _ = checker_for(scene_config(tmp_path, separation=1.05))
    rng = np.random.default_rng(seed)  # seeds chosen so that both verdicts occur
    clear, colliding = 0, 0
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
        reference = brute_force_min_distance(checker, plan)
        if report.collision_free:
            clear += 1
            assert reference >= checker.margin, (report.summary(), reference)
        if reference < checker.margin:
            colliding += 1
            assert not report.collision_free, (report.summary(), reference)
    assert clear >= 1 and colliding >= 1, (clear, colliding)


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
                               "execution": {"preflight_check": True}, "scene": cfg.extra["scene"]})
    with MultiArmExecutor(cfg, context=ros.context, preflight=preflight_for(cfg)) as executor:
        with pytest.raises(PlanRefused, match="collides when replayed synchronized") as info:
            executor.execute(plan_of(SWING, STILL, T))
        assert info.value.report.colliding_states > 0
        ok = executor.execute(plan_of(SWING, AWAY, T).time_scaled(2.0))
    assert ctl["left"].goals and len(ctl["left"].goals) == 1  # only the clear plan was sent
    assert ok.succeeded


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
