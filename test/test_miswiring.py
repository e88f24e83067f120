"""Miswiring faults in the simulator (sim/miswiring.py) and the no-motion check that names them
(hil/gravity_check.py), on the OpenArm pair, ROS-free (physics stepped synchronously).

The reference for each fault is the physical joint: a jog commanded on one joint must move the
physical joint the fault says (the other of a swap, the other way, k times, the other arm),
while the controller's own view looks right."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.interpolation import rest_to_rest
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.hil.gravity_check import GravityModel
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import ArmFaults, ArmSimSettings, sim_config

CONFIGS = {"position": "sim_openarm.yaml", "torque": "sim_openarm.yaml",
           "mit": "sim_openarm_twin.yaml"}
JOG = 0.1
#: the stage 1 threshold (hil/stages.yaml)
THRESHOLD = 0.25


def config(kind: str, faults: dict | None = None, crossed=()):
    cfg = sim_config(load_config(config_file(CONFIGS[kind])))
    sim = cfg.sim
    if kind == "torque":
        sim = dataclasses.replace(sim, arms={a.name: ArmSimSettings(controller="torque")
                                             for a in cfg.executor.arms})
    return dataclasses.replace(cfg, sim=dataclasses.replace(
        sim, faults={a: ArmFaults(**f) for a, f in (faults or {}).items()},
        crossed_arms=tuple(crossed)))


def physical(shared: SharedModel, arm: str) -> np.ndarray:
    return shared.data.qpos[shared.scene.arms[arm].qpos_adr].copy()


def jog(shared: SharedModel, cfg, arm: str, joint: int, delta: float) -> None:
    """Command arm's ``joint`` (controller order) by ``delta`` from where its controller reads
    it, 0.6 s, and let it settle."""
    names = shared.controllers[arm].joint_names
    q0 = shared.snapshot().arms[arm].positions
    q1 = q0.copy()
    q1[joint] += delta
    t = np.linspace(0.0, 0.6, 31)
    p, v = rest_to_rest(q0, q1, t)
    traj = ArmTrajectory(names, t, p, v)
    req = GoalRequest(names, t.tolist(), p.tolist(), v.tolist(), [[] for _ in t], 0.0)
    reason, goal = check_goal(req, names, float(shared.data.time), cfg.sim.tolerances)
    assert reason is None, reason
    assert traj.duration > 0
    shared.controllers[arm].submit(goal)
    for _ in range(int(1.2 / shared.control_period)):
        shared.step_cycle()


def rest_effort(shared: SharedModel, arm: str, seconds: float = 0.2) -> np.ndarray:
    """``arm``'s mean reported effort (J,) over ``seconds`` of cycles (the actuator twin's
    holding effort jitters by 0.02 N m from cycle to cycle: its encoder and MIT loop)."""
    rows = []
    for _ in range(int(seconds / shared.control_period)):
        shared.step_cycle()
        rows.append(shared.snapshot().arms[arm].efforts)
    return np.mean(rows, axis=0)


def settle(shared: SharedModel, seconds: float = 0.5) -> None:
    for _ in range(int(seconds / shared.control_period)):
        shared.step_cycle()


@pytest.mark.parametrize("kind", ["position", "torque", "mit"])
def test_each_fault_moves_the_physical_joint_it_says(kind) -> None:
    base = config(kind)
    names = base.executor.arm("left").joint_names
    cases = [({"left": {"sign_flip": (names[3],)}}, (), ("left", 3, -1.0)),
             ({"left": {"swap_joints": (names[2], names[3])}}, (), ("left", 2, 1.0)),
             ({"left": {"scale": {names[3]: 1.5}}}, (), ("left", 3, 1.5)),
             ({"left": {"zero_offset": {names[3]: 0.2}}}, (), ("left", 3, 1.0)),
             ({}, ("left", "right"), ("right", 3, 1.0))]
    for faults, crossed, (moved_arm, moved_joint, gain) in cases:
        cfg = config(kind, faults, crossed)
        shared = SharedModel.from_config(cfg)
        settle(shared)
        before = {a: physical(shared, a) for a in ("left", "right")}
        seen_before = shared.snapshot().arms["left"].positions
        jog(shared, cfg, "left", 3, JOG)
        after = {a: physical(shared, a) for a in ("left", "right")}
        moved = {a: after[a] - before[a] for a in after}
        others = np.concatenate([np.delete(moved[moved_arm], moved_joint),
                                 moved["right" if moved_arm == "left" else "left"]])
        seen = shared.snapshot().arms["left"].positions - seen_before
        what = (kind, faults, crossed, moved, seen)
        if kind == "position":
            # pure wiring: the physical joint the fault names moved gain x the jog, nothing else
            # did, and the controller's own view says its joint 3 moved by the jog
            assert moved[moved_arm][moved_joint] == pytest.approx(gain * JOG, abs=0.012), what
            assert np.abs(others).max() < 0.012, what
            assert seen[3] == pytest.approx(JOG, abs=0.012), what
        else:
            # model-based controllers (computed torque; MIT with gravity feed-forward) evaluate
            # the arm's dynamics at the pose they read: a miswired joint makes that pose wrong,
            # so the jog couples into other joints (measured up to 0.063 rad) and lands off by
            # up to 0.02 rad; the named physical joint still makes the largest move, with the
            # fault's sign and gain
            assert moved[moved_arm][moved_joint] == pytest.approx(gain * JOG, abs=0.03), what
            assert abs(moved[moved_arm][moved_joint]) > np.abs(others).max(), what


def test_wiring_faults_are_checked_by_name(tmp_path) -> None:
    import yaml

    from mj_manipulator_ros.core.config import config_from_mapping

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    for faults, match in (({"left": {"sign_flip": ["elbow"]}}, "not a joint of arm 'left'"),
                          ({"left": {"swap_joints": ["openarm_left_joint1"]}},
                           "expected two different joints"),
                          ({"left": {"scale": {"openarm_left_joint1": 0.0}}}, "factor > 0"),
                          ({"crossed_arms": ["left", "left"]}, "two different arms"),
                          ({"left": {"link_mass_scale": {"elbow": 1.2}}},
                           "link_mass_scale: 'elbow' is not a joint of arm 'left'"),
                          ({"left": {"link_mass_scale": {"openarm_left_joint2": 0.0}}},
                           "factor > 0"),
                          ({"left": {"payload_offset_m": [0.0, 0.1]}}, r"expected \[x, y, z\]"),
                          ({"left": {"payload_kg": -1.0}}, "payload_kg")):
        data["sim"]["faults"] = faults
        with pytest.raises(ConfigError, match=match):
            sim_config(config_from_mapping(data, "t"))


FAULTS = [("sign_flip", lambda n: {"sign_flip": (n,)}, "sign inverted"),
          ("zero_offset", lambda n: {"zero_offset": {n: 0.1}}, "zero offset about +0.100"),
          ("scale", lambda n: {"scale": {n: 1.5}}, "moves 1.5"),
          ("swap", None, "swapped")]


@pytest.mark.parametrize("name,make,expected", FAULTS, ids=[f[0] for f in FAULTS])
def test_standing_still_the_gravity_residual_names_the_fault(name, make, expected) -> None:
    """No motion: the arm held at its start pose; the residual exceeds the stage 1 threshold
    and the diagnosis names the fault and the joint (joint 2 and 4 carry the arm's weight)."""
    base = config("position")
    names = base.executor.arm("left").joint_names
    faults = {"swap_joints": (names[1], names[3])} if make is None else make(names[1])
    shared = SharedModel.from_config(config("position", {"left": faults}))
    start = physical(shared, "left")
    settle(shared, 1.0)
    snap = shared.snapshot().arms["left"]
    result = GravityModel(shared.scene, "left").diagnose(snap.positions, snap.efforts)
    assert result.worst > THRESHOLD and result.explained <= THRESHOLD, result
    assert expected in result.diagnosis and names[1] in result.diagnosis, result.diagnosis
    assert np.abs(physical(shared, "left") - start).max() < 1e-3   # nothing moved


def test_healthy_arms_in_random_poses_raise_no_residual() -> None:
    """Ten healthy poses (seeded, inside the joint ranges): no residual over the threshold and
    no diagnosis said."""
    rng = np.random.default_rng(7)
    cfg = config("position")
    scene = cfg.build_scene()
    worst = 0.0
    for _ in range(10):
        qpos = scene.initial_qpos.copy()
        for b in scene.arms.values():
            span = b.upper - b.lower
            qpos[b.qpos_adr] = rng.uniform(b.lower + 0.2 * span, b.upper - 0.2 * span)
        shared = SharedModel(dataclasses.replace(scene, initial_qpos=qpos), cfg.sim)
        settle(shared, 1.0)
        for arm in ("left", "right"):
            snap = shared.snapshot().arms[arm]
            worst = max(worst, GravityModel(shared.scene, arm).residual(
                snap.positions, snap.efforts).worst)
    assert worst <= THRESHOLD, worst


def test_a_force_limit_below_the_load_lets_the_joint_sag_to_it() -> None:
    """Left joint 1 limited to 3 N m where holding the start pose needs 6.6: the arm sags
    until its gravity load there is the limit; the joint's effort never exceeds it."""
    limit = 3.0
    base = config("position")
    joint = base.executor.arm("left").joint_names[0]
    shared = SharedModel.from_config(config("position", {"left": {"force_limit": {joint: limit}}}))
    start = physical(shared, "left")
    gravity = GravityModel(shared.scene, "left")
    assert abs(gravity.expected(start)[0]) > 2 * limit
    settle(shared, 3.0)
    snap = shared.snapshot().arms["left"]
    assert abs(physical(shared, "left")[0] - start[0]) > 0.1            # it sagged
    assert abs(snap.efforts[0]) <= limit + 1e-6
    assert abs(gravity.expected(snap.positions)[0]) == pytest.approx(limit, abs=0.1)


def test_a_force_limit_is_refused_under_cosim() -> None:
    import yaml

    from mj_manipulator_ros.core.config import config_from_mapping

    data = yaml.safe_load(config_file("sim_openarm_twin.yaml").read_text())
    data["sim"]["faults"] = {"left": {"force_limit": {"openarm_left_joint1": 3.0}}}
    with pytest.raises(ConfigError, match="not under sim.physics cosim"):
        sim_config(config_from_mapping(data, "t"))


def test_the_gravity_model_is_the_full_forward_pass_even_in_contact() -> None:
    """The gravity model runs without contacts (faster): at poses where the arms collide with
    each other and with the pedestal, its expected efforts are exactly MuJoCo's full forward
    pass's (bias less passive) on the scene's own model, which it leaves untouched."""
    import mujoco

    from mj_manipulator_ros.model.scene import scene_for

    config = sim_config(load_config(config_file("sim_openarm.yaml"))).executor
    scene = scene_for(config)
    flags = scene.model.opt.disableflags
    gravity = {a: GravityModel(scene, a) for a in ("left", "right")}
    assert scene.model.opt.disableflags == flags
    data = mujoco.MjData(scene.model)
    rng = np.random.default_rng(7)
    contacts = 0
    for _ in range(40):
        data.qpos[:] = scene.initial_qpos
        poses = {}
        for arm, g in gravity.items():
            lo, hi = scene.model.jnt_range[scene.arms[arm].joint_ids].T
            poses[arm] = rng.uniform(lo, hi)
            data.qpos[g.qpos_adr] = poses[arm]
        data.qvel[:] = 0.0
        mujoco.mj_forward(scene.model, data)
        contacts += data.ncon > 0
        for arm, g in gravity.items():
            g.data.qpos[:] = data.qpos   # both arms where the reference has them
            reference = data.qfrc_bias[g.dof_adr] - data.qfrc_passive[g.dof_adr]
            assert np.array_equal(g.expected(poses[arm]), reference), arm
    assert contacts >= 5, f"only {contacts} of 40 random poses in contact: not a test of contact"


@pytest.mark.parametrize("kind", ["position", "torque", "mit"])
@pytest.mark.parametrize("mode", ["still", "echo"])
def test_a_dead_wire_moves_nothing_and_reports_success(kind, mode) -> None:
    """A dead wire (openarm_ros2#63; Doosan's "SUCCEEDED while the arm did not move"): the jog's
    goal ends SUCCEEDED, no physical joint of either arm moved, the efforts are the holding
    ones; still: the states say the joint stayed; echo: they say it moved by the jog."""
    cfg = config(kind, {"left": {"dead_wire": mode}})
    shared = SharedModel.from_config(cfg)
    settle(shared)
    before = {a: physical(shared, a) for a in ("left", "right")}
    seen_before = shared.snapshot().arms["left"]
    held = rest_effort(shared, "left")
    names = shared.controllers["left"].joint_names
    q0 = seen_before.positions
    q1 = q0.copy()
    q1[3] += JOG
    t = np.linspace(0.0, 0.6, 31)
    p, v = rest_to_rest(q0, q1, t)
    req = GoalRequest(names, t.tolist(), p.tolist(), v.tolist(), [[] for _ in t], 0.0)
    reason, goal = check_goal(req, names, float(shared.data.time), cfg.sim.tolerances)
    assert reason is None, reason
    ticket = shared.controllers["left"].submit(goal)
    settle(shared, 1.2)
    seen = shared.snapshot().arms["left"]
    effort = rest_effort(shared, "left")
    moved = max(float(np.abs(physical(shared, a) - before[a]).max()) for a in before)
    assert ticket.outcome is not None and ticket.outcome.name == "SUCCEEDED", ticket.outcome
    assert moved < 1e-3, f"{kind} {mode}: a physical joint moved {moved:.4f} rad"
    assert np.abs(effort - held).max() < 0.02, (effort, held)
    shown = seen.positions - q0
    if mode == "still":
        assert np.abs(shown).max() < 1e-3, shown
    else:   # the command echoed: the jog's last point, exactly
        assert shown[3] == pytest.approx(JOG, abs=1e-9), shown
        assert np.abs(np.delete(shown, 3)).max() < 1e-9, shown
