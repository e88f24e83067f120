"""File names from names a robot chose: one path component each, distinct names distinct.
(HIL stage 2 on a robot whose joint names hold "/": test_any_robot.py, the ALOHA.)"""

from __future__ import annotations

from urllib.parse import unquote

from mj_manipulator_ros.core.file_names import file_name

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
