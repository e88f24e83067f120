"""Bodies whose geoms can never collide (contype = conaffinity = 0, as a public ALOHA model's arm
bases) are named by ``scene-info`` and by every check's scope: no check can see an arm strike
them. Checked against MuJoCo's own collision pass (an independent reference): the listed bodies
are exactly those that produce no contact when driven through another arm."""

from __future__ import annotations

import json
import subprocess
import sys

import mujoco
import numpy as np
import yaml

from mj_manipulator_ros.check.preflight import scene_checker
from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.model.limits import with_model_limits
from mj_manipulator_ros.model.scene import scene_for
from tiny_arm import ARM_XML, tiny_mapping

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli"]

#: the tiny arm with a base plate that collides with nothing and a forearm that cannot be hit
HIDDEN_XML = ARM_XML.replace(
    '<body name="link1">',
    '<body name="base" pos="0 0 -0.04"><geom type="box" size="0.08 0.08 0.01" contype="0" '
    'conaffinity="0"/></body>\n    <body name="link1">').replace(
    '<geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.03" mass="0.5"/>',
    '<geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.03" mass="0.5" contype="0" '
    'conaffinity="0"/>')


def config_path(tmp_path):
    data = tiny_mapping(tmp_path, separation=0.5)
    (tmp_path / "tiny_arm.xml").write_text(HIDDEN_XML)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, data


def contacts_of(model: mujoco.MjModel, qpos: np.ndarray) -> set[str]:
    """Body names in any contact MuJoCo reports at ``qpos`` (its own collision pass)."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    out = set()
    for c in data.contact[:data.ncon]:
        out |= {model.body(model.geom_bodyid[c.geom1]).name,
                model.body(model.geom_bodyid[c.geom2]).name}
    return out


def test_scene_info_and_the_scope_name_the_bodies_no_check_sees(tmp_path) -> None:
    path, data = config_path(tmp_path)
    out = subprocess.run([*CLI, "scene-info", "--config", str(path), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = json.loads(out.stdout)["not_collidable"]
    assert listed == {"left": ["left_link2"], "right": ["right_link2"],
                      "environment": ["left_base", "right_base"]}, listed
    text = subprocess.run([*CLI, "scene-info", "--config", str(path)], capture_output=True,
                          text=True, timeout=300).stdout
    assert "NOT COLLIDABLE (environment: contype/conaffinity let no geom touch anything; no " \
           "check sees them): left_base, right_base" in text, text[-2000:]
    checker = scene_checker(with_model_limits(config_from_mapping(data)))
    t = np.linspace(0.0, 1.0, 3)
    plan = MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.zeros((3, 2)))
                         for a in ("left", "right")})
    summary = checker.check(plan).summary()
    assert "NOT COLLIDABLE (left: contype/conaffinity let no geom touch anything; no check " \
           "sees them): left_link2" in summary, summary


def test_the_list_matches_what_mujoco_reports(tmp_path) -> None:
    """Reference: fold the left arm onto the right one in many poses; every body of the tiny
    pair either shows up in a MuJoCo contact or is on the list, never both."""
    _, data = config_path(tmp_path)
    config = with_model_limits(config_from_mapping(data))
    listed = {b for bodies in scene_checker(config).not_collidable.values() for b in bodies}
    scene = scene_for(config)   # the model as compiled, not the checker's working copies
    model = scene.model
    seen: set[str] = set()
    rng = np.random.default_rng(5)
    for _ in range(3000):
        q = rng.uniform(-2.0, 2.0, size=model.nq)
        seen |= contacts_of(model, q)
    bodies = {model.body(b).name for b in range(1, model.nbody)
              if np.any(model.geom_bodyid == b)}
    assert not (seen & listed), seen & listed
    assert bodies - seen == listed, (bodies - seen, listed)
