"""Pictures of a replay check: the worst state (MuJoCo offscreen) and clearance against time.

Offscreen rendering needs an OpenGL backend; with no display, set ``MUJOCO_GL=egl`` (the CLI
does when unset) — software Mesa works.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Mapping

import numpy as np

from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.check.report import ReplayReport

HIGHLIGHT = np.array([1.0, 0.1, 0.1, 1.0])


def render_state(checker: PlanReplayChecker, poses: Mapping[str, np.ndarray], path: Path,
                 highlight_geoms: tuple[str, ...] = (), width: int = 960, height: int = 720,
                 title: str = "") -> Path:
    """Render the scene with the arms at ``poses``; highlighted geoms drawn opaque red."""
    import mujoco

    model = copy.deepcopy(checker.model)
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    data = mujoco.MjData(model)
    data.qpos[:] = checker.base_qpos
    for name, arm in checker.arms.items():
        data.qpos[arm.qpos_adr] = poses[name]
    mujoco.mj_forward(model, data)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in highlight_geoms]
    option = mujoco.MjvOption()
    ids = [g for g in ids if g >= 0]
    for group in {int(model.geom_group[g]) for g in ids}:
        option.geomgroup[group] = 1
        hidden = (model.geom_group == group) & ~np.isin(np.arange(model.ngeom), ids)
        model.geom_rgba[hidden, 3] = 0.0  # show only the highlighted geoms of that group
    model.geom_rgba[ids] = HIGHLIGHT
    camera = mujoco.MjvCamera()
    camera.lookat[:] = [0.15, 0.0, 0.58]
    camera.distance, camera.azimuth, camera.elevation = 1.05, 200.0, -22.0
    with mujoco.Renderer(model, height=height, width=width) as renderer:
        renderer.update_scene(data, camera=camera, scene_option=option)
        pixels = renderer.render()
    _save_png(pixels, path, title)
    return path


def _save_png(pixels: np.ndarray, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(pixels.shape[1] / 100, pixels.shape[0] / 100), dpi=100)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.imshow(pixels)
    ax.axis("off")
    if title:
        ax.text(10, 25, title, color="white", fontsize=12, backgroundcolor=(0, 0, 0, 0.5))
    fig.savefig(path, dpi=100)
    plt.close(fig)


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
    return render_state(checker, poses, path, geoms, title=title)


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
