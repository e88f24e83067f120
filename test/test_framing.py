"""Pictures are framed on the robot wherever it stands, however many arms it has; titles fit.

The reference is the picture itself: every geom of the arms highlighted red, the red pixels are
the robot; it must fill a fair part of the picture and touch none of its borders (the old
fixed camera, aimed where the OpenArm stands, drew none of these robots)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from mj_manipulator_ros.check import render
from mj_manipulator_ros.core.config import config_from_mapping
from test_replay import checker_for
from tiny_arm import ARM_XML

os.environ.setdefault("MUJOCO_GL", "egl")


def named_arms(tmp_path, places: dict) -> tuple:
    """Tiny arms (links named ``<arm>_upper``, ``<arm>_fore``) at ``places`` (arm -> xyz)."""
    arm = tmp_path / "arm.xml"
    arm.write_text(ARM_XML.replace('<geom type="capsule" fromto="0 0 0 0.3',
                                   '<geom name="upper" type="capsule" fromto="0 0 0 0.3')
                   .replace('<geom type="capsule" fromto="0 0 0 0.25',
                            '<geom name="fore" type="capsule" fromto="0 0 0 0.25'))
    config = config_from_mapping({
        "arms": [{"name": a, "joint_names": [f"{a}_j1", f"{a}_j2"]} for a in places],
        "scene": {"models": [{"file": str(arm), "prefix": f"{a}_", "pos": list(p)}
                             for a, p in places.items()], "floor": True}})
    checker, _ = checker_for(config)
    return checker, tuple(f"{a}_{g}" for a in places for g in ("upper", "fore"))


def robot_pixels(tmp_path, checker, geoms, poses) -> np.ndarray:
    """(H, W) bool: where the picture shows the (highlighted) robot."""
    try:
        path = render.render_state(checker, poses, tmp_path / "p.png", highlight_geoms=geoms)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no offscreen OpenGL here: {exc}")
    rgb = np.asarray(Image.open(path).convert("RGB")).astype(int)
    return (rgb[..., 0] > 120) & (rgb[..., 1] < 90) & (rgb[..., 2] < 90)


def assert_framed(mask: np.ndarray, what: str) -> None:
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    assert rows.size, f"{what}: the robot is not in the picture at all"
    h, w = mask.shape
    assert rows[0] > 2 and cols[0] > 2 and rows[-1] < h - 3 and cols[-1] < w - 3, (
        f"{what}: the robot runs off the picture (rows {rows[0]}-{rows[-1]} of {h}, columns "
        f"{cols[0]}-{cols[-1]} of {w})")
    spread = max((rows[-1] - rows[0]) / h, (cols[-1] - cols[0]) / w)
    assert spread > 0.35, f"{what}: the robot spans only {spread:.0%} of the picture"


@pytest.mark.parametrize("places", [
    {"left": (3.0, -2.0, 0.5), "right": (3.0, -1.6, 0.5)},            # far from the origin
    {"left": (-0.5, 0.0, 0.3), "right": (0.5, 0.0, 0.3)},             # facing each other
    {"a": (0.0, 0.0, 0.5), "b": (0.6, 0.3, 0.5), "c": (0.0, 0.7, 0.5)},  # three arms
    {"solo": (1.0, 1.0, 0.0)},                                        # one arm
], ids=["far", "facing", "three", "one"])
def test_the_robot_is_in_the_picture(tmp_path, places) -> None:
    checker, geoms = named_arms(tmp_path, places)
    for pose in (np.array([0.0, 0.0]), np.array([1.3, -0.9])):
        mask = robot_pixels(tmp_path, checker, geoms, {a: pose for a in places})
        assert_framed(mask, f"arms at {places}, pose {pose}")


def test_a_highlighted_geom_is_drawn_among_the_rest_of_the_robot(tmp_path) -> None:
    """A geom of a group drawn by default, highlighted: the arm's other links are still drawn
    (before: every other geom of its group was hidden, the picture showed red alone)."""
    checker, _ = named_arms(tmp_path, {"left": (0, 0, 0.5), "right": (0, 0.4, 0.5)})
    poses = {"left": np.array([0.4, 0.2]), "right": np.array([0.0, 0.0])}
    try:
        plain = np.asarray(Image.open(render.render_state(
            checker, poses, tmp_path / "plain.png")).convert("RGB")).astype(int)
        red = np.asarray(Image.open(render.render_state(
            checker, poses, tmp_path / "red.png", highlight_geoms=("left_upper",))).convert(
                "RGB")).astype(int)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no offscreen OpenGL here: {exc}")
    changed = np.abs(plain - red).sum(axis=2) > 30
    reddened = changed & (red[..., 0] > 120) & (red[..., 1] < 90)
    assert reddened.sum() > 200, "the highlighted link is not drawn red"
    # everything else is as in the plain picture (but the link's shaded edges): nothing hidden
    other = int((changed & ~reddened).sum())
    assert other < 0.01 * changed.size, (
        f"{other} pixels changed other than the red link ({reddened.sum()} red): geoms hidden")


def test_a_long_title_is_wrapped_to_the_picture() -> None:
    font = ImageFont.load_default(size=16)
    draw = ImageDraw.Draw(Image.new("RGB", (10, 10)))
    title = ("band: t = 2.35 s, penetration 19 mm, 14 of 601 states colliding\n"
             + "; ".join(f"vx300s_left/{n}_link x vx300s_right/{n}_link" for n in range(6))
             + "\n" + "x" * 300)
    wrapped = render._wrapped(title, lambda t: draw.textlength(t, font=font), 300)
    lines = wrapped.splitlines()
    assert all(draw.textlength(line, font=font) <= 300 for line in lines), lines
    assert "".join(wrapped.split()) == "".join(title.split())   # nothing lost
    assert len(lines) > 3
