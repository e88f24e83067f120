"""A mass overlay (model/mass_overlay.py) named in a configuration: the compiled scene carries
the measured masses and centres of mass, on a body whose inertia the model states and on one
whose inertia MuJoCo infers from its geoms; a bad overlay is refused by name, before anything
compiles. The reference: MuJoCo's own compile of the unchanged model."""

from __future__ import annotations

import dataclasses
import json

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.mass_overlay import parse_overlay

from tiny_arm import tiny_config


def _body(model: mujoco.MjModel, name: str) -> int:
    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)


def _with_overlay(tmp_path, overlay) -> object:
    path = tmp_path / "overlay.json"
    path.write_text(overlay if isinstance(overlay, str) else json.dumps(overlay))
    cfg = tiny_config(tmp_path)
    return cfg, dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene,
                                                                   mass_overlay=str(path)))


def test_the_scene_carries_the_overlay_and_nothing_else_changes(tmp_path) -> None:
    """left_link2's mass from its geom (0.5 kg) made 0.8 kg with its centre of mass moved: the
    compiled scene has them, its rotational inertia scaled by 0.8 / 0.5 about the same axes;
    every other body as MuJoCo compiles the model unchanged; its gravity load on left_j1 is the
    hand computation's."""
    cfg, overlaid = _with_overlay(tmp_path, {"bodies": {
        "left_link2": {"mass": 0.8, "com": [0.2, 0.0, 0.0]}}, "fit": {"kept": "unread"}})
    plain, scene = cfg.build_scene().model, overlaid.build_scene().model
    b = _body(plain, "left_link2")
    assert scene.body_mass[b] == pytest.approx(0.8)
    assert scene.body_ipos[b] == pytest.approx([0.2, 0.0, 0.0])
    assert scene.body_inertia[b] == pytest.approx(plain.body_inertia[b] * 0.8 / plain.body_mass[b])
    assert scene.body_iquat[b] == pytest.approx(plain.body_iquat[b])
    others = [k for k in range(plain.nbody) if k != b]
    assert np.array_equal(scene.body_mass[others], plain.body_mass[others])
    assert np.array_equal(scene.body_ipos[others], plain.body_ipos[others])
    # the arm lies along x, j1's axis is z: gravity (-z) loads nothing; tilt gravity along -y
    # and the load on left_j1 is sum(m g x_com) over the links beyond it
    data = mujoco.MjData(scene)
    scene.opt.gravity[:] = (0.0, -9.81, 0.0)
    mujoco.mj_forward(scene, data)
    link1 = _body(scene, "left_link1")
    by_hand = 9.81 * (scene.body_mass[link1] * scene.body_ipos[link1][0] + 0.8 * (0.3 + 0.2))
    dof = scene.jnt_dofadr[mujoco.mj_name2id(scene, mujoco.mjtObj.mjOBJ_JOINT, "left_j1")]
    assert abs(data.qfrc_bias[dof]) == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize("overlay, message", [
    ({"bodies": {"no_such_link": {"mass": 1.0, "com": [0, 0, 0]}}},
     r"body 'no_such_link' is not in the scene's model; its bodies: \[.*'left_link2'"),
    ({"bodies": {"left_link2": {"mass": -0.08, "com": [0, 0, 0]}}},
     r"body 'left_link2': mass -0.08; expected a positive number of kg"),
    ({"bodies": {"left_link2": {"mass": 1.0, "com": [0, 0]}}},
     r"body 'left_link2': com \[0, 0\]; expected \[x, y, z\]"),
    ({"masses": {}}, r"expected a mapping with 'bodies'"),
    ("{not json", r"cannot read it as JSON"),
])
def test_a_bad_overlay_is_refused_by_name(tmp_path, overlay, message) -> None:
    _, overlaid = _with_overlay(tmp_path, overlay)
    with pytest.raises(ConfigError, match=message):
        overlaid.build_scene()


def test_a_non_finite_com_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"com \[0.0, nan, 0.0\]"):
        parse_overlay({"bodies": {"b": {"mass": 1.0, "com": [0.0, float("nan"), 0.0]}}}, "t")


def test_a_simulated_load_fault_is_the_arm_s_truth_whatever_overlay_the_checks_carry(
        tmp_path) -> None:
    """sim.faults' model mismatch states the simulated arm against the robot's description: a
    configuration naming an overlay (as a rehearsal does after ``hil --measure-load``) gives
    the checks the overlay and the simulator the description times the fault, not the overlay
    times the fault (the load counted twice)."""
    from mj_manipulator_ros.sim.shared_model import SharedModel

    faults = {"faults": {"left": {"link_mass_scale": {"left_j2": 1.5}, "payload_kg": 0.2}}}
    path = tmp_path / "overlay.json"
    path.write_text(json.dumps({"bodies": {"left_link2": {"mass": 0.75, "com": [0.2, 0, 0]}}}))
    plain = tiny_config(tmp_path, sim=faults)
    overlaid = dataclasses.replace(plain, scene=dataclasses.replace(plain.scene,
                                                                   mass_overlay=str(path)))
    truth = SharedModel(plain.build_scene(), plain.sim).model        # description x fault
    checks = overlaid.build_scene()
    simulated = SharedModel(checks, overlaid.sim).model
    b = _body(truth, "left_link2")
    assert checks.model.body_mass[b] == pytest.approx(0.75)          # the checks: the overlay
    for field in ("body_mass", "body_ipos", "body_inertia", "body_iquat"):
        assert np.array_equal(getattr(simulated, field), getattr(truth, field)), field
    assert truth.body_mass[b] != pytest.approx(0.75 * 1.5 + 0.2)     # not vacuous
