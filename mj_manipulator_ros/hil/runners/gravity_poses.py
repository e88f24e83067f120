"""Stage 2, after the jogs: the pose set, where gravity shows the sign of every joint the start
pose and the jogs left unloaded, and the gain pose, where the eye (or gravity) shows a gear
ratio set wrong on the joints that stood near their zero (``hil/identifiability.py``).

Each pose turns one joint of one arm from its start pose (the smallest such move that loads the
joints left, at the jogs' speed, replay-checked against the other arms first); at rest there the
arm's efforts are weighed against the model (``pose_set_gravity``, diagnosed as at stage 1) and
the operator's eye compares the pose with its picture; then the arm goes back. The first pose
that fails ends the stage there, after the move back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mj_manipulator_ros.hil.check_result import CheckResult, check, not_applicable, report_detail
from mj_manipulator_ros.hil.identifiability import PoseSet, pose_set
from mj_manipulator_ros.hil.motions import return_to, toward_middle, with_holds
from mj_manipulator_ros.hil.pose_picture import picture_check
from mj_manipulator_ros.hil.stages import Stage
from mj_manipulator_ros.hil.runners.joint_jog import rest_of

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def planned_pose_set(session: "HilSession", stage: Stage, arm: str, model) -> PoseSet:
    """``arm``'s pose set from its measured pose, the jogs ``stage`` (stage 2) will make
    counted as visited."""
    p = stage.params
    start, direction = toward_middle(session, arm)
    jogs = [start + direction[j] * p["jog_rad"] * np.eye(len(start))[j]
            for j in range(len(start))]
    lower, upper = session.limits(arm)
    want = p["pose_set_margin"] * stage.check("pose_set_gravity").threshold
    return pose_set(model, start, jogs, lower, upper, want, p["pose_set_max_rad"],
                    p["pose_set_gain_rad"])


def gravity_poses(session: "HilSession", stage: Stage, models: dict) -> list[CheckResult]:
    """Every arm's pose set visited (module docstring); ``models``: arm -> GravityModel."""
    from mj_manipulator_ros.hil.gravity_check import describe

    out: list[CheckResult] = []
    threshold = stage.check("pose_set_gravity").threshold
    pictures = "scene" in session.config.extra or session.sim_node is not None
    for arm in session.config.arm_names:
        names = session.config.arm(arm).joint_names
        model = models.get(arm)
        if model is None:
            out.append(not_applicable(stage, "pose_set_gravity", arm, 0.0,
                                      "no scene section: no model to weigh the arm with"))
            continue
        start = session.pose(arm)
        plan = planned_pose_set(session, stage, arm, model)
        if not plan.poses and plan.gain is None:
            out.append(check(stage, "pose_set_gravity", arm, 0.0,
                             "no pose needed: " + plan.describe(names, _want(stage))))
            continue
        visits = [(p.q, f"{arm}/{names[p.mover]} {p.move:+.2f} rad", f"stage2_pose_{arm}_"
                   f"{names[p.mover]}", "the sign of " + ", ".join(
                       f"{names[j]} ({m:.2f} N m)" for j, m in p.serves)) for p in plan.poses]
        if plan.gain is not None:
            turned = [names[j] for j in plan.gain.joints]
            visits.append((plan.gain.q, f"{arm}/gain pose", f"stage2_pose_{arm}_gain",
                           "the gear ratio of " + ", ".join(turned) + " (to the eye: each "
                           f"{stage.params['pose_set_gain_rad']:g} rad from its zero)"))
        for q_pose, subject, picture, shows in visits:
            move = session.move_plan({arm: q_pose})
            if "scene" in session.config.extra:
                replay = session.checker.check(timeline=with_holds(session, move),
                                               mode="recorded")
                if not replay.collision_free:
                    out.append(check(stage, "pose_set_gravity", subject, None,
                                     "the pose would collide, not visited: "
                                     + replay.summary().splitlines()[0]))
                    continue
            report, samples = session.run(move, settle=stage.params["jog_settle_s"])
            if not report.succeeded:
                out.append(check(stage, "pose_set_gravity", subject, None,
                                 f"the move to the pose failed: {report_detail(report)}"))
                _back(session, arm, start, out, stage, subject)
                return out
            # (the states of the window waited for: a loaded machine delivers them late, and
            # the pose was "not measured" with none yet)
            q, effort = rest_of(session, {arm: names}, stage.params["rest_window_s"],
                                latest=False)[arm]
            if q is None:
                out.append(check(stage, "pose_set_gravity", subject, None,
                                 "no joint states of the arm at rest at the pose"))
                _back(session, arm, start, out, stage, subject)
                return out
            if effort is None:
                out.append(not_applicable(stage, "pose_set_gravity", subject, 0.0,
                                          "the joint states carry no efforts"))
            else:
                result = model.residual(q, effort)
                if result.worst > threshold:
                    result = model.diagnose(q, effort)
                out.append(check(stage, "pose_set_gravity", subject, result.worst,
                                 describe(arm, result, threshold, names)
                                 + f" at the pose set's pose showing {shows}"))
            if pictures:
                out.append(picture_check(session, stage, subject, picture,
                                         {a: (q if a == arm else session.pose(a))
                                          for a in session.config.arm_names}))
            _back(session, arm, start, out, stage, subject)
            if not all(r.passed for r in out):
                return out
    return out


def _want(stage: Stage) -> float:
    return stage.params["pose_set_margin"] * stage.check("pose_set_gravity").threshold


def _back(session: "HilSession", arm: str, start: np.ndarray, out: list, stage: Stage,
          subject: str) -> None:
    """Back to the start pose; a failure doing so is one more failed check."""
    report = return_to(session, {arm: start})
    if not report.succeeded:
        out.append(check(stage, "pose_set_gravity", subject, None,
                         f"moving back to the start pose failed: {report_detail(report)}"))
