"""The actuator-twin co-simulation: the seven validations of bench/cosim_bench.py asserted, the
exchange's shortcut against the plain MuJoCo calls, the stability pre-check against an
independent reading of the inertias, the crossing plan, and what the build refuses."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import cosim_bench as cb  # noqa: E402
from cosim_fixtures import params, pendulum_xml  # noqa: E402

from mj_manipulator_ros.core.config import config_from_mapping, load_config  # noqa: E402
from mj_manipulator_ros.core.errors import ConfigError  # noqa: E402
from mj_manipulator_ros.resources import config_file  # noqa: E402
from mj_manipulator_ros.sim.actuator_twin import TICK_S, ActuatorTwin, TwinParams  # noqa: E402
from mj_manipulator_ros.model.twin_model import choose_exchange  # noqa: E402
from mj_manipulator_ros.sim.cosim import CoSim  # noqa: E402
from mj_manipulator_ros.sim.shared_model import SharedModel  # noqa: E402
from mj_manipulator_ros.sim.sim_config import sim_config  # noqa: E402

TWIN = "sim_openarm_twin.yaml"


@pytest.fixture(scope="module")
def openarm():
    return SharedModel.from_config(sim_config(load_config(config_file(TWIN))))


def test_1_no_load_equals_a_standalone_twin() -> None:
    r = cb.v1_no_load()
    assert r["swing_rad"] > 0.5 and r["max_abs_diff_rad"] <= 1e-9


def test_2_load_sign_on_every_openarm_joint() -> None:
    r = cb.v2_load_sign()
    assert len(r["joints"]) == 14
    assert r["max_load_minus_gravity_Nm"] <= 1e-6   # the load is the gravity torque to hold
    assert r["max_rel_error"] <= 1e-6                # a = -L / J
    assert all(a * load < 0 for a, load in zip(r["accel_rad_s2"], r["load_Nm"]))


def test_3_constant_external_torque() -> None:
    r = cb.v3_external_torque()
    for how in ("qfrc_applied", "xfrc_applied"):
        assert r[how]["accel_rel_error"] <= 0.02, r[how]
        assert r[how]["hold_motor_torque_Nm"] == pytest.approx(-1.0, abs=0.01)


def test_4_single_pendulum_converges_first_order() -> None:
    r = cb.v4_convergence()
    errors = r["error_vs_20kHz_mrad"]
    assert all(errors[k] <= r["limit_mrad"][k] for k in errors), r
    assert -1.2 <= r["loglog_slope"] <= -0.8
    assert max(r["error_vs_monolithic_mrad"].values()) <= 8.0


def test_5_passive_at_the_configured_rate_not_at_100_hz() -> None:
    r = cb.v5_passivity()
    peaks = r["peak_energy_over_initial"]
    assert peaks["1000"] <= 1.01
    assert peaks["100"] > 1.05   # the adversarial side: too slow an exchange injects energy


def test_6_two_joint_coupling() -> None:
    r = cb.v6_coupling()
    assert r["joint2_swing_rad"] > 0.05            # joint 2 moves only through the coupling
    assert r["joint2_vs_monolithic_mrad"] <= 5.0
    assert r["corr_torque_on_rotor2_vs_minus_M21_a1"] >= 0.95


def test_7_contact() -> None:
    r = cb.v7_contact()
    assert r["passed"], r
    assert r["max_penetration_mm"] > 0.1           # it did press into the box


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
    load = cos._load()
    np.testing.assert_allclose(load, _plain_load(openarm.model, openarm.data, cos), atol=1e-9)
    # a link pressed into a box: the constraint force in it
    m = mujoco.MjModel.from_xml_string(pendulum_xml(gravity=False, box_at=0.3))
    d = mujoco.MjData(m)
    twin = ActuatorTwin(params(0.1), np.array([0.305]), np.array([0.2]))
    box = CoSim(m, d, np.array([0]), np.array([0]), twin, 20)
    box.accel[:] = -3.0
    box._write_state()
    assert d.ncon == 1
    np.testing.assert_allclose(box._load(), _plain_load(m, d, box), atol=1e-9)


def test_exchange_rate_from_the_stability_bound(openarm) -> None:
    """r = M_ii / J read independently from the original scene (its inertia minus the
    armature: the twin's J): auto takes the lowest grid rate at or above every joint's need;
    the next rate down is refused, naming the joint and r."""
    original = sim_config(load_config(config_file("sim_openarm.yaml"))).build_scene()
    m = original.model
    d = mujoco.MjData(m)
    d.qpos[:] = original.initial_qpos
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    omega = 2 * math.pi * 10.0
    needs = {}
    for arm in original.arms.values():
        for name, dof in zip(arm.joint_names, arm.dof_adr):
            j = m.dof_armature[dof]
            r = (full[dof, dof] - j) / j
            bound = math.acos(-1 / r) / (omega * math.sqrt(r * r - 1)) if r > 1 else math.inf
            needs[name] = (r, 2.0 / bound)
    worst = max(needs, key=lambda n: needs[n][1])
    chosen = openarm.exchange
    assert chosen.binding == worst
    grid = sorted(1 / (n * TICK_S) for n in range(1, 41) if 40 % n == 0)
    assert chosen.rate_hz == min(g for g in grid if g >= needs[worst][1])
    lower = max(g for g in grid if g < chosen.rate_hz)
    with pytest.raises(ConfigError, match=rf"{lower:g} Hz is unstable for joint '{worst}' "
                                          rf"\(r = M_ii / J = {needs[worst][0]:.2f}"):
        choose_exchange(0.002, chosen.bounds, lower)
    # J1/J2 are the coupled-inertia joints (r >> 1); the wrist is stable at any rate
    assert needs["openarm_left_joint1"][0] > 10 and needs["openarm_left_joint7"][0] < 1


def test_twin_owned_model(openarm) -> None:
    """Fingers welded, no armature, joint friction or actuators: every coordinate the twin's."""
    m = openarm.model
    assert m.nv == 14 and m.nu == 0
    assert not m.dof_armature.any() and not m.dof_frictionloss.any()
    assert not m.body_gravcomp.any()
    # what records keep: the exchange, not a physics step MuJoCo never takes
    scene = openarm.scene
    assert scene.physics_summary().startswith("co-simulation: actuator twin at 20 kHz, exchange")
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
