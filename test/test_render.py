"""Pictures of the scene: a kept renderer draws each picture as a fresh one would."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from mj_manipulator_ros.check import render
from mj_manipulator_ros.core.config import config_from_mapping
from test_replay import checker_for
from tiny_arm import ARM_XML

os.environ.setdefault("MUJOCO_GL", "egl")


def named_pair(tmp_path):
    """The tiny pair, its links' geoms named (``<prefix>upper``, ``<prefix>fore``)."""
    arm = tmp_path / "arm.xml"
    arm.write_text(ARM_XML.replace('<geom type="capsule" fromto="0 0 0 0.3',
                                   '<geom name="upper" type="capsule" fromto="0 0 0 0.3')
                   .replace('<geom type="capsule" fromto="0 0 0 0.25',
                            '<geom name="fore" type="capsule" fromto="0 0 0 0.25'))
    models = [{"file": str(arm), "prefix": f"{a}_", "pos": [0, y, 0.5]}
              for a, y in (("left", 0.0), ("right", 0.4))]
    return config_from_mapping({
        "arms": [{"name": a, "joint_names": [f"{a}_j1", f"{a}_j2"]} for a in ("left", "right")],
        "scene": {"models": models, "floor": True}})


def pixels(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def fresh(tmp_path, checker, poses, name, **kw) -> np.ndarray:
    """The picture from a renderer made for it (no painter kept before or after)."""
    render._painters.kept = None
    try:
        return pixels(render.render_state(checker, poses, tmp_path / name, **kw))
    finally:
        for _, painter in (render._painters.kept or {}).values():
            painter.renderer.close()
        render._painters.kept = None


def test_a_kept_renderer_carries_nothing_from_one_picture_to_the_next(tmp_path) -> None:
    """A highlighted picture, then a plain one at another pose, on the kept renderer: the plain
    one is the picture a fresh renderer draws (no red, no hidden geoms, no old pose), and the
    highlighted one is the fresh one's too."""
    checker, scene = checker_for(named_pair(tmp_path))
    apart = {"left": np.array([0.0, 0.0]), "right": np.array([0.0, 0.0])}
    turned = {"left": np.array([1.2, 0.6]), "right": np.array([-0.8, 0.3])}
    geoms = ("left_upper", "left_fore")
    try:
        reference_plain = fresh(tmp_path, checker, turned, "ref_plain.png", title="plain")
        reference_red = fresh(tmp_path, checker, apart, "ref_red.png", highlight_geoms=geoms,
                              title="red")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no offscreen OpenGL here ({type(exc).__name__}: {exc})")
    render._painters.kept = None
    try:
        red = pixels(render.render_state(checker, apart, tmp_path / "red.png",
                                         highlight_geoms=geoms, title="red"))
        plain = pixels(render.render_state(checker, turned, tmp_path / "plain.png", title="plain"))
        assert len(render._painters.kept) == 1, "the second picture was drawn on the kept renderer"
    finally:
        for _, painter in (render._painters.kept or {}).values():
            painter.renderer.close()
        render._painters.kept = None
    assert not np.array_equal(reference_red, reference_plain), "the two pictures differ at all"
    assert np.array_equal(red, reference_red)
    assert np.array_equal(plain, reference_plain), (
        f"{int((plain != reference_plain).any(axis=2).sum())} pixels differ from a fresh picture")
