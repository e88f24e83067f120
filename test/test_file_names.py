"""File names from names a robot chose: one path component each, distinct names distinct."""

from __future__ import annotations

import os
from urllib.parse import unquote

import yaml

from mj_manipulator_ros.core.file_names import file_name
from mj_manipulator_ros.hil.runner import run_hil
from tiny_arm import tiny_mapping

os.environ.setdefault("MUJOCO_GL", "egl")

NAMES = ["vx300s_left/waist", "vx300s_left_waist", "vx300s_left%2Fwaist", "a b", "a\\b", "a:b",
         "joint*1?", "日本/関節", "", ".", "..", "...", "-x", "x.png", "left_j1"]


def test_every_name_is_one_safe_component_and_none_collide(tmp_path) -> None:
    made = [file_name(n) for n in NAMES]
    assert len(set(made)) == len(NAMES), dict(zip(NAMES, made))
    for name, f in zip(NAMES, made):
        assert f and f not in (".", "..") and "/" not in f and "\\" not in f, (name, f)
        assert all(c.isascii() and (c.isalnum() or c in "-_.%") for c in f), (name, f)
        path = tmp_path / f"stage2_jog_left_{f}.png"
        path.write_bytes(b"x")                      # writable where it says
        assert path.parent == tmp_path and path.exists()
        if name not in ("", ".", ".."):
            assert unquote(f) == name               # readable back


def test_plain_names_are_kept_as_they_are() -> None:
    for name in ("left_j1", "openarm_left_joint7", "x.png", "-x"):
        assert file_name(name) == name


def test_stage_2_passes_on_a_robot_whose_joint_names_hold_slashes(tmp_path) -> None:
    """HIL stage 2 (rehearsed on the simulator) on the tiny pair named as MuJoCo prefixes
    make them (``bot/left/j1``): every jog picture is written under pictures/ and the stage
    passes (regression: the picture's name made a missing folder, the eye check was "not
    measured" and the stage failed). One small-motion run instead of ten (hil.stages)."""
    m = tiny_mapping(tmp_path)
    for arm, model in zip(m["arms"], m["scene"]["models"]):
        a = arm["name"]
        model["prefix"] = f"bot/{a}/"
        arm["joint_names"] = [f"bot/{a}/j1", f"bot/{a}/j2"]
        arm["joint_limits"] = {f"bot/{a}/j{k}": v
                               for k, v in zip((1, 2), arm["joint_limits"].values())}
    m["hil"] = {"stages": {"small_motion": {"params": {"runs": 1}, "checks": {"clean_runs": 1}}}}
    path = tmp_path / "slashes.yaml"
    path.write_text(yaml.safe_dump(m))
    said: list[str] = []
    code = run_hil(str(path), sim=True, stage=2, yes=True, force=True,
                   reason="a robot with slashes in its joint names", results=str(tmp_path / "r"),
                   say=said.append)
    assert code == 0, "\n".join(said)
    (run,) = [d for d in (tmp_path / "r").iterdir() if d.is_dir()]
    pictures = sorted(p.name for p in (run / "pictures").iterdir())
    for a in ("left", "right"):
        for j in ("j1", "j2"):
            name = f"stage2_jog_{a}_{file_name(f'bot/{a}/{j}')}.png"
            assert name in pictures, pictures
