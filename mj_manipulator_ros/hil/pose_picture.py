"""The operator's step where physics cannot see a fault: a picture of the pose the robot
should be in, and a confirmation that it is.

A zero offset on a joint that carries no load in the pose, a sign flip of a joint standing at
its zero, crossed arms in a symmetric pose: the joint states and the efforts all agree with the
model, and only an eye on the robot can tell. The tool renders the pose the joint states say
(MuJoCo offscreen, saved in the run folder) and asks:

- on hardware, the operator, with a typed word (``picture_word``): no answer, no pass;
- with ``--sim``, an emulated operator whose eye is the simulator's physical joints: the same
  scene posed from them (what the robot truly looks like, rendered beside it) against the
  picture; it answers "not the same" when any body of any arm stands more than
  ``picture_tolerance_m`` from where the picture has it or is turned more than
  ``picture_tolerance_rad``, naming the joint from which the arm differs (the first body, base
  outward, that stands or turns differently).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

import mujoco
import numpy as np

from mj_manipulator_ros.core.file_names import file_name
from mj_manipulator_ros.hil.check_result import CheckResult, check
from mj_manipulator_ros.hil.stages import Stage

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


#: a body is "where the picture has it" within these (a rounding, not a fault)
SAME_PLACE_M, SAME_TURN_RAD = 0.001, 0.005


class BodyPlaces:
    """Where each arm's bodies stand (world positions, m) for joint positions, on its own
    MjData of the scene's model.

    Args:
        scene: the scene with the arms bound.
    """

    def __init__(self, scene) -> None:
        self.model = scene.model
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:] = scene.initial_qpos
        self.arms = {n: (np.asarray(a.qpos_adr), sorted(a.body_ids))
                     for n, a in scene.arms.items()}

    def places(self, poses: Mapping[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """arm -> its bodies' world positions (B, 3) and orientations (B, 9) with the arms at
        ``poses`` (J,) each."""
        for arm, q in poses.items():
            self.data.qpos[self.arms[arm][0]] = q
        mujoco.mj_kinematics(self.model, self.data)
        return {arm: (self.data.xpos[self.arms[arm][1]].copy(),
                      self.data.xmat[self.arms[arm][1]].copy()) for arm in poses}

    def first_difference(self, seen: Mapping[str, np.ndarray], shown: Mapping[str, np.ndarray]
                         ) -> tuple[float, float, str]:
        """Between two sets of poses: the largest body displacement (m), the largest body
        rotation (rad), and the joint from which they differ: the joint of the first body (base
        outward) that stands or turns differently (a body turning about its own joint's axis
        does not move its origin; it turns). "" when none does."""
        a, b = self.places(seen), self.places(shown)
        moved_most, turned_most, first = 0.0, 0.0, ""
        for arm in seen:
            moved = np.linalg.norm(a[arm][0] - b[arm][0], axis=1)
            r1, r2 = a[arm][1].reshape(-1, 3, 3), b[arm][1].reshape(-1, 3, 3)
            cos = (np.einsum("bij,bij->b", r1, r2) - 1.0) / 2.0
            turned = np.arccos(np.clip(cos, -1.0, 1.0))
            moved_most = max(moved_most, float(moved.max()))
            turned_most = max(turned_most, float(turned.max()))
            off = np.flatnonzero((moved > SAME_PLACE_M) | (turned > SAME_TURN_RAD))
            if off.size and not first:
                body = self.arms[arm][1][int(off[0])]
                joint = self.model.body_jntadr[body]
                name = mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_JOINT, joint) \
                    if joint >= 0 else mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, body)
                first = f"{arm} {name}"
        return moved_most, turned_most, first


def physical_poses(session: "HilSession") -> dict[str, np.ndarray]:
    """The simulated arms' true joint positions (J,) each, past any injected miswiring."""
    shared = session.sim_node.shared
    adr = {n: np.asarray(a.qpos_adr) for n, a in shared.scene.arms.items()}
    return shared.read(lambda m, d: {n: d.qpos[i].copy() for n, i in adr.items()})


def picture_check(session: "HilSession", stage: Stage, subject: str, name: str,
                  poses: Optional[Mapping[str, np.ndarray]] = None) -> CheckResult:
    """``pose_matches_picture`` for the pose the joint states say (every arm's latest, or
    ``poses``): the picture saved as ``pictures/<name>.png`` in the run folder, then the
    operator's answer (module docstring)."""
    from mj_manipulator_ros.check.render import render_state

    poses = dict(poses or {a: session.pose(a) for a in session.config.arm_names})
    folder = session.pictures_dir or Path.cwd()
    folder.mkdir(parents=True, exist_ok=True)
    name = file_name(name)   # joint names may hold "/" (core/file_names.py)
    picture = folder / f"{name}.png"
    title = f"stage {stage.number}, {subject}: the pose the joint states say"
    try:
        render_state(session.checker, poses, picture, title=title)
    except Exception as exc:  # noqa: BLE001 - no OpenGL here: the operator cannot be shown
        return check(stage, "pose_matches_picture", subject, None,
                     f"could not render the picture ({type(exc).__name__}: {exc})")
    if session.sim_node is not None:
        truth = physical_poses(session)
        seen = {a: truth[a] for a in poses}
        render_state(session.checker, seen, folder / f"{name}_robot.png",
                     title=f"stage {stage.number}, {subject}: the simulated robot")
        moved, turned, first = BodyPlaces(session.sim_node.scene).first_difference(seen, poses)
        # what an eye comparing the two can tell: a body this far off, or turned this much
        seen_off = max(moved / stage.params["picture_tolerance_m"],
                       turned / stage.params["picture_tolerance_rad"])
        figures = f"bodies up to {moved * 1e3:.1f} mm off and {np.degrees(turned):.1f} deg turned"
        detail = (f"emulated operator: the robot is NOT as in {picture.name} ({figures}): it "
                  f"differs from {first} outward: check that joint (zero, direction, wiring)"
                  if seen_off > 1.0 else
                  f"emulated operator: the robot is as in {picture.name} ({figures})")
        return check(stage, "pose_matches_picture", subject, seen_off, detail)
    word = stage.params["picture_word"]
    if not session.is_tty:
        return check(stage, "pose_matches_picture", subject, None,
                     f"no terminal: nobody confirmed the robot stands as in {picture}")
    session.say(f"Look at the robot and at {picture}: {title}.")
    try:
        answer = session.ask(f"Type '{word}' if the robot stands as in the picture: ")
    except EOFError:
        answer = ""
    same = answer.strip() == word   # the operator's eye: a yes or a no, not a distance
    return check(stage, "pose_matches_picture", subject, 0.0 if same else float("inf"),
                 f"operator: {'the robot stands as in' if same else 'NOT as in'} {picture}",
                 passed=same)
