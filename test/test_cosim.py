"""The actuator-twin co-simulation: the validations of bench/cosim_bench.py asserted in both
exchanges (mass_matrix, reference), its fidelity at large inertia ratios against a monolithic
MuJoCo model, the exchange's shortcut against the plain MuJoCo calls, both stability pre-checks
against an independent reading of the model, the crossing plan, and what the build refuses."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import cosim_bench as cb  # noqa: E402
from cosim_fixtures import MASS, REFERENCE, params, pendulum_xml  # noqa: E402

from mj_manipulator_ros.core.config import config_from_mapping, load_config  # noqa: E402
from mj_manipulator_ros.core.errors import ConfigError  # noqa: E402
from mj_manipulator_ros.resources import config_file  # noqa: E402
from mj_manipulator_ros.sim.actuator_twin import TICK_S, ActuatorTwin, TwinParams  # noqa: E402
from mj_manipulator_ros.model.exchange import ExchangeMode, choose_exchange  # noqa: E402
from mj_manipulator_ros.sim.cosim import CoSim  # noqa: E402
from mj_manipulator_ros.sim.shared_model import SharedModel  # noqa: E402
from mj_manipulator_ros.sim.sim_config import sim_config  # noqa: E402

TWIN = "sim_openarm_twin.yaml"
MODES = pytest.mark.parametrize("mode", [MASS, REFERENCE], ids=lambda m: m.value)


def _twin_config(mode: ExchangeMode = MASS):
    import dataclasses

    cfg = sim_config(load_config(config_file(TWIN)))
    cosim = dataclasses.replace(cfg.sim.cosim, exchange=mode)
    return dataclasses.replace(cfg, sim=dataclasses.replace(cfg.sim, cosim=cosim))


@pytest.fixture(scope="module")
def openarm():
    return SharedModel.from_config(sim_config(load_config(config_file(TWIN))))


@MODES
def test_1_no_load_equals_a_standalone_twin(mode) -> None:
    r = cb.v1_no_load(mode=mode)
    assert r["swing_rad"] > 0.5 and r["max_abs_diff_rad"] <= 1e-9


@MODES
def test_2_load_sign_on_every_openarm_joint(mode) -> None:
    r = cb.v2_load_sign(mode)
    assert len(r["joints"]) == 14
    assert r["max_load_minus_gravity_Nm"] <= 1e-6   # the load is the gravity torque to hold
    assert r["max_rel_error"] <= 1e-6                # a = -L / J, or -(diag(J) + M)^-1 L
    accel, load = np.array(r["accel_rad_s2"]), np.array(r["load_Nm"])
    if mode is REFERENCE:
        assert all(a * f < 0 for a, f in zip(accel, load))
    else:
        assert accel @ load < 0                       # the load does negative work


@MODES
def test_3_constant_external_torque(mode) -> None:
    r = cb.v3_external_torque(mode=mode)
    for how in ("qfrc_applied", "xfrc_applied"):
        assert r[how]["accel_rel_error"] <= 0.02, r[how]
        assert r[how]["hold_motor_torque_Nm"] == pytest.approx(-1.0, abs=0.01)


@MODES
def test_4_single_pendulum_converges(mode) -> None:
    """reference: first order in the exchange period; mass_matrix: second order (the rest's
    line through two exchanges), and every error under the reference's limits."""
    r = cb.v4_convergence(mode=mode)
    errors = r["error_vs_20kHz_mrad"]
    assert all(errors[k] <= r["limit_mrad"][k] for k in errors), r
    if mode is REFERENCE:
        assert -1.2 <= r["loglog_slope"] <= -0.8
    else:
        assert r["loglog_slope"] <= -1.8, r
    assert max(r["error_vs_monolithic_mrad"].values()) <= 8.0


@MODES
def test_5_passivity(mode) -> None:
    r = cb.v5_passivity(mode=mode)
    peaks = r["peak_energy_over_initial"]
    assert peaks["1000"] <= 1.01
    if mode is REFERENCE:
        assert peaks["100"] > 1.05   # the adversarial side: its delayed inertia injects energy
    else:
        assert max(peaks.values()) <= 1.01, peaks   # no inertia crosses the exchange


@MODES
def test_6_two_joint_coupling(mode) -> None:
    r = cb.v6_coupling(mode=mode)
    assert r["joint2_swing_rad"] > 0.05            # joint 2 moves only through the coupling
    assert r["joint2_vs_monolithic_mrad"] <= 5.0
    if mode is MASS:
        assert r["joint2_vs_monolithic_mrad"] <= 0.1, r  # the coupling is not delayed any more
    assert r["corr_torque_on_rotor2_vs_minus_M21_a1"] >= 0.95


@MODES
def test_7_contact(mode) -> None:
    r = cb.v7_contact(mode=mode)
    assert r["passed"], r
    assert r["max_penetration_mm"] > 0.1           # it did press into the box


def test_8_fidelity_at_large_inertia_ratios() -> None:
    """Against the monolithic reference (one MuJoCo model, the twin's J as armature, RK4 at the
    tick): the mass_matrix exchange within 2 mrad at r = 20 and 40 at 1 kHz, free and tracking,
    one and two links; its error shrinks with the rate; r = 56 stays stable at 500 Hz. The
    reference exchange, on the same cases, is far off (the test can tell them apart)."""
    mass = cb.v8_fidelity(ratios=(20.0, 40.0, 56.0), rates=(100.0, 500.0, 1000.0, 4000.0),
                          modes=(MASS,), seconds=1.0)
    reference = cb.v8_fidelity(ratios=(20.0,), rates=(1000.0,), modes=(REFERENCE,), seconds=1.0)
    rows = {(w["mode"], w["fixture"], w["motion"], w["r"], w["rate_hz"]): w["max_error_mrad"]
            for w in mass["fidelity"] + reference["fidelity"]}
    cases = {(f, m) for _, f, m, _, _ in rows}
    assert len(cases) == 4
    for fixture, motion in cases:
        for ratio in (20.0, 40.0):
            err = [rows["mass_matrix", fixture, motion, ratio, hz] for hz in (100.0, 1000.0, 4000.0)]
            assert None not in err, (fixture, motion, ratio, err)
            assert err[1] <= 2.0, (fixture, motion, ratio, err)
            assert err[0] > err[1] > err[2], (fixture, motion, ratio, err)
        assert rows["mass_matrix", fixture, motion, 56.0, 500.0] is not None
    worst_reference = [rows["reference", f, m, 20.0, 1000.0] for f, m in cases]
    assert None in worst_reference or max(worst_reference) > 10.0, worst_reference


def test_openarm_crossing_plan_against_monolithic_mujoco() -> None:
    """The shipped twin (mass_matrix, auto's 500 Hz) against one MuJoCo model of the same
    twin-owned arms, the twin's J as armature, driven by the same MIT commands: every joint
    within 2 mrad."""
    r = cb.openarm_vs_monolithic(MASS)
    assert r["passed"] and r["exchange_hz"] <= 1000.0, r
    for arm, worst in r["arms"].items():
        assert worst["max_joint_difference_mrad"] <= 2.0, (arm, worst)


def test_crossing_plan_through_the_twin() -> None:
    import torque_bench as tb

    twin, position = tb.crossing_config(TWIN), tb.crossing_config("sim_openarm.yaml")
    assert set(twin["outcomes"].values()) == {"succeeded"}
    assert twin["start_skew_s"] <= cb.CONTROL_S
    assert twin["max_tracking_error_rad"] <= 2 * position["max_tracking_error_rad"]


def _plain_load(model, data, cos: CoSim) -> np.ndarray:
    """The load by the contract's literal calls: mj_forward, then mj_inverse."""
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:] = data.qpos, data.qvel
    d.qfrc_applied[:], d.xfrc_applied[:] = data.qfrc_applied, data.xfrc_applied
    mujoco.mj_forward(model, d)
    d.qacc[cos.dof_adr] = cos.accel
    mujoco.mj_inverse(model, d)
    body = np.zeros(model.nv)
    for b in range(model.nbody):
        mujoco.mj_applyFT(model, d, d.xfrc_applied[b, :3], d.xfrc_applied[b, 3:], d.xipos[b], b,
                          body)
    return (d.qfrc_inverse - d.qfrc_applied - body)[cos.dof_adr]


def test_the_exchange_shortcut_gives_mj_forward_plus_mj_inverse(openarm) -> None:
    """Steps 4-5 run MuJoCo's position and velocity stages and mj_inverse without them: the
    load must be that of the literal mj_forward + mj_inverse, moving, in contact, pushed."""
    cos = openarm.cosim
    rng = np.random.default_rng(3)
    cos.twin.v[:] = rng.normal(0, 0.5, cos.twin.v.size)
    cos.accel[:] = rng.normal(0, 2.0, cos.accel.size)
    openarm.data.xfrc_applied[openarm.model.nbody - 1, :] = [1, -2, 3, 0.1, 0.2, -0.3]
    openarm.data.qfrc_applied[3] = 0.7
    cos._write_state()
    rest = cos._load()
    plain = _plain_load(openarm.model, openarm.data, cos)
    np.testing.assert_allclose(cos.inverse_load, plain, atol=1e-9)
    # mass_matrix: what crosses the exchange is the load without the links' inertia
    full = np.zeros((openarm.model.nv, openarm.model.nv))
    check = mujoco.MjData(openarm.model)
    check.qpos[:] = openarm.data.qpos
    mujoco.mj_forward(openarm.model, check)
    mujoco.mj_fullM(openarm.model, check, full)
    block = full[np.ix_(cos.dof_adr, cos.dof_adr)]
    np.testing.assert_allclose(rest, plain - block @ cos.accel, atol=1e-9)
    np.testing.assert_allclose(cos.link_inertia, block, atol=1e-12)
    # a link pressed into a box: the constraint force in it
    m = mujoco.MjModel.from_xml_string(pendulum_xml(gravity=False, box_at=0.3))
    d = mujoco.MjData(m)
    twin = ActuatorTwin(params(0.1), np.array([0.305]), np.array([0.2]))
    box = CoSim(m, d, np.array([0]), np.array([0]), twin, 20, REFERENCE)
    box.accel[:] = -3.0
    box._write_state()
    assert d.ncon == 1
    np.testing.assert_allclose(box._load(), _plain_load(m, d, box), atol=1e-9)


def _original_inertia():
    """The original OpenArm scene (servos, armature: the twin's J), its model and its joint-space
    inertia at the start pose."""
    original = sim_config(load_config(config_file("sim_openarm.yaml"))).build_scene()
    m = original.model
    d = mujoco.MjData(m)
    d.qpos[:] = original.initial_qpos
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    return original, m, full


def test_reference_exchange_rate_from_the_stability_bound() -> None:
    """reference: r = M_ii / J read independently from the original scene (its inertia minus
    the armature: the twin's J): auto takes the lowest grid rate at or above every joint's need;
    the next rate down is refused, naming the joint and r."""
    original, m, full = _original_inertia()
    omega = 2 * math.pi * 10.0
    needs = {}
    for arm in original.arms.values():
        for name, dof in zip(arm.joint_names, arm.dof_adr):
            j = m.dof_armature[dof]
            r = (full[dof, dof] - j) / j
            bound = math.acos(-1 / r) / (omega * math.sqrt(r * r - 1)) if r > 1 else math.inf
            needs[name] = (r, 2.0 / bound)
    worst = max(needs, key=lambda n: needs[n][1])
    chosen = _twin_config(REFERENCE).build_scene().exchange
    assert chosen.mode is REFERENCE and chosen.binding == worst
    grid = sorted(1 / (n * TICK_S) for n in range(1, 41) if 40 % n == 0)
    assert chosen.rate_hz == min(g for g in grid if g >= needs[worst][1])
    lower = max(g for g in grid if g < chosen.rate_hz)
    with pytest.raises(ConfigError, match=rf"{lower:g} Hz is unstable for joint '{worst}' "
                                          rf"under the reference exchange \(r = M_ii / J = "
                                          rf"{needs[worst][0]:.1f}"):
        choose_exchange(0.002, chosen.bounds, lower, REFERENCE)
    # J1/J2 are the coupled-inertia joints (r >> 1); the wrist is stable at any rate
    assert needs["openarm_left_joint1"][0] > 10 and needs["openarm_left_joint7"][0] < 1


def test_mass_matrix_exchange_rate_from_damping_and_stiffness(openarm) -> None:
    """mass_matrix: no inertia crosses the exchange; each joint's bound is the link damping's
    (T < (J + M_ii) / b) and the gravity stiffness's (the period at which the held line grows
    an undamped swing by 1 % per swing: omega T = (3 ln 1.01 / pi)^(1/3)), read independently from
    the original scene (its inertia includes the armature J; its gravity torque differenced by
    hand). auto takes the lowest grid rate; a control period whose grid reaches below the need
    is refused at that rate, naming the joint."""
    original, m, full = _original_inertia()
    needs = {}
    for arm in original.arms.values():
        for name, dof, adr in zip(arm.joint_names, arm.dof_adr, arm.qpos_adr):
            inertia, b = full[dof, dof], m.dof_damping[dof]
            torques = []
            for h in (1e-4, -1e-4):
                e = mujoco.MjData(m)
                e.qpos[:] = original.initial_qpos
                e.qpos[adr] += h
                mujoco.mj_forward(m, e)
                torques.append(e.qfrc_bias[dof] - e.qfrc_passive[dof])
            k = abs(torques[0] - torques[1]) / 2e-4
            resolve = (3 * math.log(1.01) / math.pi) ** (1 / 3)
            bound = min(inertia / b if b > 0 else math.inf,
                        resolve * math.sqrt(inertia / k) if k > 0 else math.inf)
            needs[name] = 2.0 / bound
    chosen = openarm.exchange
    assert chosen.mode is MASS
    by_joint = {b.joint: b.min_rate_hz for b in chosen.bounds}
    for name, need in needs.items():
        assert by_joint[name] == pytest.approx(need, rel=1e-3), name
    assert chosen.rate_hz == 500.0 and max(needs.values()) < 500.0   # the grid's lowest
    worst = max(needs, key=needs.get)
    assert needs[chosen.binding] == pytest.approx(needs[worst], rel=1e-6)
    # a 10 ms control period reaches 100 Hz, below the need: refused, naming the joint
    with pytest.raises(ConfigError, match=r"100 Hz is unstable for joint 'openarm_\w+_joint\d' "
                                          r"under the mass_matrix exchange \(link damping"):
        choose_exchange(0.01, chosen.bounds, 100.0, MASS)
    assert choose_exchange(0.01, chosen.bounds, "auto", MASS).rate_hz >= max(needs.values())


def test_twin_owned_model(openarm) -> None:
    """Fingers welded, no armature, joint friction or actuators: every coordinate the twin's."""
    m = openarm.model
    assert m.nv == 14 and m.nu == 0
    assert not m.dof_armature.any() and not m.dof_frictionloss.any()
    assert not m.body_gravcomp.any()
    # what records keep: the exchange, not a physics step MuJoCo never takes
    scene = openarm.scene
    assert scene.physics_summary().startswith("co-simulation: actuator twin at 20 kHz, "
                                              "mass_matrix exchange 500 Hz")
    import json

    assert json.loads(scene.artifacts()["cosim_exchange"])["rate_hz"] == openarm.exchange.rate_hz


def test_a_coordinate_left_to_mujoco_is_refused(tmp_path) -> None:
    from tiny_arm import ARM_XML

    (tmp_path / "a.xml").write_text(ARM_XML)
    (tmp_path / "box.xml").write_text(
        '<mujoco><worldbody><body name="box" pos="1 0 1"><freejoint name="box_free"/>'
        '<geom type="box" size=".05 .05 .05"/></body></worldbody></mujoco>')
    cfg = sim_config(config_from_mapping({
        "arms": [{"name": "left", "joint_names": ["left_j1", "left_j2"]}],
        "scene": {"models": [{"file": str(tmp_path / "a.xml"), "prefix": "left_"},
                             {"file": str(tmp_path / "box.xml"), "prefix": "obj_"}],
                  "floor": False},
        "sim": {"physics": "cosim", "arms": {"left": {"controller": "mit"}}}}))
    with pytest.raises(ConfigError, match=r"joint\(s\) \['obj_box_free'\] are outside every arm"):
        SharedModel.from_config(cfg)


@pytest.mark.parametrize("sim, words", [
    ({"arms": {"left": {"controller": "mit"}}}, r"'mit' drives an actuator twin; set sim.physics"),
    ({"physics": "cosim"}, r"sim.arms.left.controller: 'position' under sim.physics cosim"),
    ({"physics": "cosim", "arms": {"left": {"controller": "mit"}, "right": {"controller": "mit"}},
      "cosim": {"exchange_hz": 3000}}, r"3000 Hz is not a whole number of 50 us ticks dividing"),
    ({"physics": "cosim", "arms": {"left": {"controller": "mit"}, "right": {"controller": "mit"}},
      "cosim": {"exchange_hz": "fast"}}, r"expected a rate in Hz or 'auto', got 'fast'"),
    ({"physics": "cosim", "arms": {"left": {"controller": "mit"}, "right": {"controller": "mit"}},
      "faults": {"left": {"command_latency_s": 0.01}}}, r"no actuators"),
    ({"physics": "rk4"}, r"sim.physics: expected one of \['mujoco', 'cosim'\], got 'rk4'"),
    ({"physics": "cosim", "arms": {"left": {"controller": "mit"}, "right": {"controller": "mit"}},
      "cosim": {"exchange": "diagonal"}},
     r"sim.cosim.exchange: expected one of \['mass_matrix', 'reference'\], got 'diagonal'"),
])
def test_bad_cosim_settings_are_named(tmp_path, sim, words) -> None:
    from tiny_arm import tiny_config

    with pytest.raises(ConfigError, match=words):
        SharedModel.from_config(tiny_config(tmp_path, sim=sim))


def test_bad_twin_parameters_are_named() -> None:
    one = np.ones(2)
    with pytest.raises(ConfigError, match=r"inertia\[1\] = 0.0; expected > 0"):
        TwinParams(np.array([1.0, 0.0]), one, 0 * one, 0 * one, 0 * one, 0 * one)
    with pytest.raises(ConfigError, match=r"coulomb has shape \(3,\); expected \(2,\)"):
        TwinParams(one, one, 0 * one, np.zeros(3), 0 * one, 0 * one)


def test_docs_cosim_table_is_generated_from_the_fields() -> None:
    from mj_manipulator_ros.core import overrides
    from mj_manipulator_ros.sim.sim_config import CosimSettings

    table = overrides.settings_table(CosimSettings, "`sim.cosim` key")
    doc = Path(__file__).resolve().parents[1] / "docs" / "cosim.md"
    assert table in doc.read_text(), "docs/cosim.md's table is stale: run tools/settings_tables.py"


def test_the_c_tick_loop_equals_the_numpy_reference() -> None:
    """The C kernel (built by make setup) against the numpy loop it replaces, from the same
    state through random commands, loads, load lines and carried inertias, with a torque limit
    that clips, Coulomb and viscous friction, quantized and exact encoders: equal to rounding."""
    from mj_manipulator_ros.sim import actuator_twin
    from mj_manipulator_ros.sim.actuator_twin import default_resolution

    assert actuator_twin.KERNEL is not None, "the C tick loop was not built (make setup)"
    rng = np.random.default_rng(1)
    n = 14
    p = TwinParams(rng.uniform(0.01, 0.05, n), rng.uniform(2, 10, n),
                   np.r_[np.zeros(7), rng.uniform(0, 0.1, 7)], rng.uniform(0, 0.3, n),
                   np.full(n, 1.6e-4), np.r_[np.full(10, default_resolution()), np.zeros(4)])
    fast = ActuatorTwin(p, rng.normal(0, 0.5, n))
    slow = ActuatorTwin(p, fast.q.copy(), kernel=False)
    assert fast.kernel and not slow.kernel
    inertia = rng.normal(0, 0.05, (n, n))
    inertia = inertia @ inertia.T
    clipped = 0
    for k in range(300):
        command = (rng.normal(0, 0.5, n), rng.normal(0, 1, n), 50.0, 2.0, rng.normal(0, 1, n))
        load, rate = rng.normal(0, 1, n), rng.normal(0, 50, n)
        for twin in (fast, slow):
            twin.command(*command)
            twin.carry(inertia if k % 2 else None)
            twin.advance(20, load, rate if k % 3 else None)
        clipped += int(np.any(np.abs(fast.torque) > 0.99 * p.torque_limit))
    assert clipped > 0 and np.ptp(fast.q) > 0.1
    for name in ("q", "v", "torque"):
        np.testing.assert_allclose(getattr(fast, name), getattr(slow, name), rtol=0, atol=1e-12,
                                   err_msg=name)
    np.testing.assert_allclose(fast.acceleration, slow.acceleration, rtol=1e-9, atol=1e-9)
    assert fast.ticks == slow.ticks == 6000


def test_the_c_tick_loop_refuses_a_wrong_buffer() -> None:
    from mj_manipulator_ros.sim.actuator_twin import KERNEL

    twin = ActuatorTwin(params(0.1, n=2), np.zeros(2))
    args = [10, TICK_S, twin.q, twin.v, twin.torque, twin.acceleration, np.zeros(2), np.zeros(2),
            twin.kp, twin.kd, np.ones(2), np.ones(2), np.ones(2), np.zeros(2), 100.0, np.zeros(2),
            np.zeros(2), np.zeros(2), None, None]
    bad = list(args)
    bad[8] = np.zeros(3)
    with pytest.raises(ValueError, match=r"kp must be 2 contiguous float64 values, got 24 bytes"):
        KERNEL.advance(*bad)
    bad = list(args)
    bad[19] = np.zeros((3, 3))
    with pytest.raises(ValueError, match=r"step_matrix must be 4 contiguous float64 values"):
        KERNEL.advance(*bad)
    KERNEL.advance(*args)   # the same arguments, right: runs
    assert not twin.q.any()  # nothing drives a twin at rest with no load


def test_the_stiffness_bound_is_where_a_swing_grows_one_percent() -> None:
    """The mass_matrix pre-check's stiffness bound, checked on the real exchange: a link on a
    spring (gravity off, no damping, motor off) swings freely. At the bound's period
    (omega dt = 0.212) its amplitude grows about 1 % per swing period; at half the period (what
    the pre-check allows) about 1/8 of that; at a quarter, nothing visible."""
    k, inertia, j = 4.0, 0.0099, 0.0001          # omega = sqrt(k / (I + J)) = 20 rad/s
    xml = f"""<mujoco><option gravity="0 0 0"/><worldbody><body name="link">
      <joint name="j1" type="hinge" axis="0 1 0" stiffness="{k}"/>
      <inertial pos="0 0 0" mass="1" diaginertia="{inertia} {inertia} {inertia}"/>
    </body></worldbody></mujoco>"""
    omega = math.sqrt(k / (inertia + j))
    resolve = (3 * math.log(1.01) / math.pi) ** (1 / 3)
    bound = resolve / omega
    bounds = _spring_bounds(xml, j)
    assert bounds[0].bound_s == pytest.approx(bound, rel=1e-3)
    period = 2 * math.pi / omega
    growth = {}
    for fraction in (1.0, 0.5, 0.25):
        dt = fraction * bound
        ticks = max(1, int(round(dt / TICK_S)))
        m = mujoco.MjModel.from_xml_string(xml)
        twin = ActuatorTwin(params(j), np.array([0.1]))
        cos = CoSim(m, mujoco.MjData(m), np.array([0]), np.array([0]), twin, ticks, MASS)
        peaks, last, rising = [], 0.1, False
        for _ in range(int(20 * period / (ticks * TICK_S))):
            cos.exchange()
            q = float(twin.q[0])
            if rising and q < last:
                peaks.append(last)
            rising, last = q > last, q
        per_swing = (peaks[-1] / peaks[0]) ** (1 / (len(peaks) - 1))
        growth[fraction] = per_swing - 1.0
    # measured 1.02 %, 0.123 %, 0.016 %: the cube of the period, as derived
    assert 0.008 < growth[1.0] < 0.0125, growth
    assert 0.8 / 8 < growth[0.5] / growth[1.0] < 1.25 / 8, growth
    assert 0.8 / 64 < growth[0.25] / growth[1.0] < 1.25 / 64, growth


def _spring_bounds(xml: str, j: float):
    from mj_manipulator_ros.model.exchange import exchange_stability

    m = mujoco.MjModel.from_xml_string(xml)
    return exchange_stability(m, np.zeros(m.nq), [0], np.array([j]), MASS)
