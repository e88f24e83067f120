"""Where a picture's camera stands: framed on the robot's arms, whatever the robot.

Every picture an operator compares with the real robot (a check's worst state, the HIL pose
and jog pictures) is taken by MuJoCo's free camera aimed at the arms as they stand: every
corner of the bounding boxes of the geoms of the arms and of the bodies they are mounted on
(at the pose) is in view, the robot's widest extent filling the picture. The camera looks across the line through the arms' bases, from the side the
arms reach toward (their geoms' centroid against that line), turned ``TURN_DEG`` for a
three-quarter view and looking down ``ELEVATION_DEG``; a single arm, or arms whose centroid
lies on their bases' line, is seen from -y (looking along +y).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

#: how far the view is turned from square-on to the arms, deg
TURN_DEG = 20.0
#: how far the camera looks down, deg (negative: down)
ELEVATION_DEG = -22.0
#: the robot's extent in the picture is grown by this factor (a margin around it)
MARGIN = 1.1


@dataclass(frozen=True)
class CameraPose:
    """MuJoCo free-camera parameters: ``lookat`` (3,) m, ``distance`` m, ``azimuth`` and
    ``elevation`` deg (MuJoCo's convention: azimuth 0 looks along +x)."""

    lookat: tuple[float, float, float]
    distance: float
    azimuth: float
    elevation: float

    def apply(self, camera) -> None:
        """Set a ``mujoco.MjvCamera`` (free) to this pose."""
        camera.lookat[:] = self.lookat
        camera.distance, camera.azimuth, camera.elevation = \
            self.distance, self.azimuth, self.elevation


def framed_bodies(model, arm_bodies: Iterable[Iterable[int]]) -> np.ndarray:
    """The bodies a picture frames: each arm's moving bodies and the body each is mounted on
    (its root's parent, unless the world). Returns sorted body ids (K,)."""
    bodies: set[int] = set()
    for ids in arm_bodies:
        ids = set(int(b) for b in ids)
        bodies |= ids
        for b in ids:
            parent = int(model.body_parentid[b])
            if parent not in ids and parent != 0:
                bodies.add(parent)
    return np.array(sorted(bodies), dtype=int)


def frame(model, data, bodies: np.ndarray, base_bodies: np.ndarray,
          aspect: float) -> CameraPose:
    """The camera pose framing ``bodies`` (K,) at the pose in ``data`` (after ``mj_forward``);
    ``base_bodies`` (A,): one body per arm whose position is that arm's base; ``aspect`` the
    picture's width / height. Every corner of the bodies' geoms' bounding boxes is in view, the
    widest extent filling the picture but for ``MARGIN``."""
    points = _corners(model, data, bodies)
    toward = _reach_direction(data.xpos[base_bodies][:, :2], points[:, :2].mean(axis=0))
    look = -toward   # from the side the arms reach toward, looking back at them
    azimuth = float(np.degrees(np.arctan2(look[1], look[0]))) + TURN_DEG
    az, el = np.radians(azimuth), np.radians(ELEVATION_DEG)
    forward = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    centre = (points.min(axis=0) + points.max(axis=0)) / 2.0
    x, y = (points - centre) @ right, (points - centre) @ up
    centre = centre + right * (x.max() + x.min()) / 2.0 + up * (y.max() + y.min()) / 2.0
    rel = points - centre
    x, y, z = rel @ right, rel @ up, rel @ forward
    tan_v = np.tan(np.radians(float(model.vis.global_.fovy)) / 2.0)
    tan_h = tan_v * aspect
    # a point at depth (distance + z) in front of the camera is in view while |x| <= tan_h x
    # depth and |y| <= tan_v x depth
    distance = float(np.max(np.maximum(MARGIN * np.abs(x) / tan_h, MARGIN * np.abs(y) / tan_v)
                            - z))
    near = float(np.max(z)) + 2.0 * float(model.vis.map.znear) * float(model.stat.extent)
    distance = max(distance, near, 0.1)
    return CameraPose(tuple(float(v) for v in centre), distance, azimuth, ELEVATION_DEG)


def _corners(model, data, bodies: np.ndarray) -> np.ndarray:
    """World positions (8 G, 3) of the corners of every geom's bounding box (its own frame)
    of ``bodies``; the bodies' frames where they hold no geom."""
    geoms = np.flatnonzero(np.isin(model.geom_bodyid, bodies) & (model.geom_type != 0))
    if geoms.size == 0:
        return data.xpos[bodies].copy()
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)],
                     dtype=float)
    aabb = model.geom_aabb[geoms]                       # (G, 6): centre, half sizes
    local = aabb[:, None, :3] + signs[None] * aabb[:, None, 3:]        # (G, 8, 3)
    rot = data.geom_xmat[geoms].reshape(-1, 3, 3)
    world = np.einsum("gij,gkj->gki", rot, local) + data.geom_xpos[geoms][:, None, :]
    return world.reshape(-1, 3)


def _reach_direction(bases: np.ndarray, centroid: np.ndarray) -> np.ndarray:
    """Unit (2,) horizontal direction across the bases' line (A, 2) toward ``centroid`` (2,);
    -y where that is undetermined."""
    default = np.array([0.0, -1.0])
    if len(bases) < 2:
        across = centroid - bases[0] if len(bases) else np.zeros(2)
    else:
        centred = bases - bases.mean(axis=0)
        _, _, vt = np.linalg.svd(centred)
        line = vt[0]
        normal = np.array([-line[1], line[0]])
        side = float(np.dot(centroid - bases.mean(axis=0), normal))
        across = normal * np.sign(side) if abs(side) > 1e-3 else np.zeros(2)
    n = float(np.linalg.norm(across))
    return across / n if n > 1e-3 else default
