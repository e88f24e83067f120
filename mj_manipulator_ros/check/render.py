"""Pictures of a replay check: the worst state (MuJoCo offscreen) and clearance against time.

Offscreen rendering needs an OpenGL backend; with no display, set ``MUJOCO_GL=egl`` (the CLI
does when unset) — software Mesa works.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Mapping

import numpy as np

from mj_manipulator_ros.check.framing import frame, framed_bodies
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.check.report import ReplayReport

HIGHLIGHT = np.array([1.0, 0.1, 0.1, 1.0])

#: MuJoCo's rendering flags turned off for these pictures (``mjtRndFlag`` names): a picture is
#: read for where the robot stands, which shadows and reflections do not tell; off, a 960 x 720
#: picture of the OpenArm pair renders in 0.13 s instead of 0.39 s on software Mesa (2 cores)
PLAIN_RENDERING_FLAGS = ("mjRND_SHADOW", "mjRND_REFLECTION")


class _Painter:
    """One offscreen renderer of a checker's scene, on its own copy of the model and its own
    MjData (the checker's are not touched), kept for the pictures that follow: making a
    renderer costs more than a render (0.19 s against 0.32 s at 960 x 720, software Mesa).

    An OpenGL context is current on one thread: painters are kept per thread.
    """

    def __init__(self, model, width: int, height: int) -> None:
        import mujoco

        self.model = copy.deepcopy(model)
        self.model.vis.global_.offwidth = max(self.model.vis.global_.offwidth, width)
        self.model.vis.global_.offheight = max(self.model.vis.global_.offheight, height)
        self.rgba = self.model.geom_rgba.copy()
        self.data = mujoco.MjData(self.model)
        self.width, self.height = width, height
        self.renderer = mujoco.Renderer(self.model, height=height, width=width)

    def paint(self, qpos: np.ndarray, highlight_geoms: tuple[str, ...], bodies: np.ndarray,
              bases: np.ndarray) -> np.ndarray:
        """Pixels (H, W, 3) uint8 of the scene at ``qpos`` (nq,), framed on ``bodies`` with
        the arms' ``bases`` (``check/framing.py``), highlighted geoms opaque red. A highlighted
        geom of a group drawn by default is drawn among the rest of the robot; one of a hidden
        group (collision geoms often are) is drawn alone of its group, over the visible robot."""
        import mujoco

        model, data = self.model, self.data
        model.geom_rgba[:] = self.rgba
        data.qpos[:] = qpos
        mujoco.mj_forward(model, data)
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in highlight_geoms]
        option = mujoco.MjvOption()
        ids = [g for g in ids if g >= 0]
        for group in {int(model.geom_group[g]) for g in ids}:
            if option.geomgroup[group]:
                continue   # drawn anyway, with the robot around it
            option.geomgroup[group] = 1
            hidden = (model.geom_group == group) & ~np.isin(np.arange(model.ngeom), ids)
            model.geom_rgba[hidden, 3] = 0.0  # show only the highlighted geoms of that group
        model.geom_rgba[ids] = HIGHLIGHT
        camera = mujoco.MjvCamera()
        frame(model, data, bodies, bases, self.width / self.height).apply(camera)
        self.renderer.update_scene(data, camera=camera, scene_option=option)
        for flag in PLAIN_RENDERING_FLAGS:
            self.renderer.scene.flags[getattr(mujoco.mjtRndFlag, flag)] = 0
        return self.renderer.render()


#: per thread: (id of the checker's model, width, height) -> its painter, the last few kept
_painters = threading.local()
PAINTERS_KEPT = 4


def _painter(model, width: int, height: int) -> _Painter:
    kept = getattr(_painters, "kept", None)
    if kept is None:
        kept = _painters.kept = OrderedDict()
    key = (id(model), width, height)
    found = kept.get(key)
    if found is not None and found[0] is model:  # the same model, not a new one at its address
        kept.move_to_end(key)
        return found[1]
    painter = _Painter(model, width, height)
    kept[key] = (model, painter)
    while len(kept) > PAINTERS_KEPT:
        kept.popitem(last=False)[1][1].renderer.close()
    return painter


def render_state(checker: PlanReplayChecker, poses: Mapping[str, np.ndarray], path: Path,
                 highlight_geoms: tuple[str, ...] = (), width: int = 960, height: int = 720,
                 title: str = "", grippers: Mapping[str, float] = {}) -> Path:
    """Render the scene with the arms at ``poses`` (arm -> (J,) rad) and their gripper joints
    where ``grippers`` has them (joint -> rad or m; else the reference pose) to a PNG at
    ``path``; highlighted geoms drawn opaque red, ``title`` (lines) written at the top left."""
    qpos = np.array(checker.base_qpos, dtype=float)
    for name, arm in checker.arms.items():
        qpos[arm.qpos_adr] = poses[name]
        for joint, adr in zip(arm.gripper.joint_names, arm.gripper.qpos_adr):
            qpos[adr] = grippers.get(joint, qpos[adr])
    model = checker.model
    moving = [arm.body_ids for arm in checker.arms.values()]
    bodies = framed_bodies(model, moving)
    bases = np.array([_base(model, ids) for ids in moving], dtype=int)
    pixels = _painter(model, width, height).paint(qpos, highlight_geoms, bodies, bases)
    _save_png(pixels, path, title)
    return path


def _base(model, ids) -> int:
    """The body an arm is mounted on (its root body's parent), or its root if that is the
    world."""
    root = min(ids, key=lambda b: (_depth(model, b), b))
    parent = int(model.body_parentid[root])
    return parent if parent != 0 else int(root)


def _depth(model, body: int) -> int:
    depth = 0
    while body != 0:
        body, depth = int(model.body_parentid[body]), depth + 1
    return depth


def _save_png(pixels: np.ndarray, path: Path, title: str) -> None:
    """The pixels (H, W, 3) as a PNG, the title in white on a dark band (Pillow: a tenth of
    the time of a matplotlib figure of the same size)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.fromarray(pixels)
    if title:
        draw = ImageDraw.Draw(image, "RGBA")
        font = ImageFont.load_default(size=16)
        title = _wrapped(title, lambda text: draw.textlength(text, font=font),
                         image.width - 28)
        box = draw.multiline_textbbox((10, 8), title, font=font)
        draw.rectangle((box[0] - 4, box[1] - 3, box[2] + 4, box[3] + 3), fill=(0, 0, 0, 128))
        draw.multiline_text((10, 8), title, fill=(255, 255, 255), font=font)
    image.save(path, compress_level=3)


def _wrapped(title: str, length, width: float) -> str:
    """``title`` with every line broken at spaces (or, a word wider than the picture, at any
    character) so that none is wider than ``width`` pixels by ``length(text)``."""
    out: list[str] = []
    for line in title.splitlines() or [""]:
        current = ""
        for word in line.split(" "):
            candidate = word if not current else current + " " + word
            if length(candidate) <= width:
                current = candidate
                continue
            if current:
                out.append(current)
            current = ""
            for ch in word:
                if current and length(current + ch) > width:
                    out.append(current)
                    current = ""
                current += ch
        out.append(current)
    return "\n".join(out)


def render_worst(checker: PlanReplayChecker, report: ReplayReport, plan, path: Path,
                 skews=None) -> Path:
    """The worst state of a report: deepest collision, or the closest approach."""
    if report.worst_time is None:
        raise ValueError("the report has no worst state (nothing within the horizon)")
    if report.mode == "band":  # the first colliding pair of plan times (else the diagonal)
        b = report.band_collision
        poses = checker.poses_at(plan, b["t1"] if b else report.worst_time, "synchronized")
        if b:
            poses[b["arms"][1]] = checker.poses_at(plan, b["t2"], "synchronized")[b["arms"][1]]
    else:
        poses = checker.poses_at(plan, report.worst_time, report.mode, skews)
    at = [p for p in report.pairs if abs(p.first_time - report.worst_time) < 1e-9] or list(report.pairs)
    geoms = tuple(g for p in at[:8] for g in p.geoms)
    depth = max((p.max_penetration for p in report.pairs), default=0.0)
    title = (f"{report.mode}: t = {report.worst_time:.2f} s, "
             + (f"penetration {depth * 1e3:.0f} mm, {report.colliding_states} of "
                f"{report.states_checked} states colliding" if report.pairs else
                "closest approach, no collision"))
    if at:
        title += "\n" + "; ".join(f"{p.bodies[0]} x {p.bodies[1]}" for p in at[:3])
    return render_state(checker, poses, path, geoms, title=title, grippers=report.grippers)


def plot_clearance(reports: list[ReplayReport], path: Path) -> Path:
    """Clearance of each arm pair against time, for one or more reports (e.g. two modes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
    for r in reports:
        for label, trace in r.clearance_traces.items():
            ax.plot(r.times, np.asarray(trace) * 1e3, label=f"{r.mode}: {label}", lw=1.2)
    r0 = reports[0]
    ax.axhline(r0.margin * 1e3, color="r", ls="--", lw=1, label=f"margin {r0.margin * 1e3:.0f} mm")
    ax.axhline(r0.horizon * 1e3, color="gray", ls=":", lw=1, label="measured up to (horizon)")
    ax.set_xlabel("time into the replay (s)")
    ax.set_ylabel("clearance (mm)")
    ax.set_title("arm-to-arm clearance")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
