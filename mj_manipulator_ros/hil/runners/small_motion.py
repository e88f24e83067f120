"""Stage 2: each joint jogged alone, then each arm alone, a small out-and-back motion at low
speed, repeatedly."""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check, report_detail, worst
from mj_manipulator_ros.hil.motions import out_and_back
from mj_manipulator_ros.hil.runners.gravity_poses import gravity_poses
from mj_manipulator_ros.hil.runners.joint_jog import NEVER_RAN, gravity_models, joint_jog
from mj_manipulator_ros.hil.runners.load_measure import measured_load
from mj_manipulator_ros.hil.stages import Protocol, Stage
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def small_motion(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """Every joint jogged alone first (``runners/joint_jog.py``), then the pose set where
    gravity shows the signs the jogs could not (``runners/gravity_poses.py``), the arms' load
    fitted from their efforts at rest at all those poses (``runners/load_measure.py``); only
    when every joint passed, each arm's out-and-back, ``runs`` times."""
    p = stage.params
    out = joint_jog(session, stage)
    if not all(r.passed for r in out):
        return out
    models = gravity_models(session)
    out.extend(gravity_poses(session, stage, models))
    if not all(r.passed for r in out):
        return out
    out.extend(measured_load(session, stage, models))
    for arm in session.config.arm_names:
        start = session.pose(arm)
        plan = out_and_back(session, arm, p["amplitude_rad"], p["duration_s"]).time_scaled(p["speed"])
        clean, tracks, returns, detail, never = 0, [], [], "", ""
        for run in range(int(p["runs"])):
            report, samples = session.run(plan)
            s = samples.arm(session.config.arm(arm).joint_names)
            track = A.tracking_error(s, plan[arm], report.start_stamp) if report.start_stamp else np.inf
            back = float(np.max(np.abs(session.pose(arm) - start)))
            tracks.append(track)
            returns.append(back)
            f = report.first_failure
            if not report.succeeded and f is not None and f.reason in NEVER_RAN:
                never = (f"run {run + 1}'s goal never ran ({f.reason.value}): the arm was not "
                         f"judged on it, nothing about it is known: {report_detail(report)}")
                break
            ok = (report.succeeded and track <= stage.check("tracking_error").threshold
                  and back <= stage.check("returned_to_start").threshold)
            if not ok:
                detail = f"run {run + 1}: " + report_detail(report)
                break
            clean += 1
        if never:   # as a jog that never ran: said as it is, the arm not blamed
            out.append(check(stage, "clean_runs", arm, None, f"{clean} clean run(s), then {never}"))
            continue
        out.append(check(stage, "clean_runs", arm, float(clean), detail))
        out.append(check(stage, "tracking_error", arm, worst(tracks)))
        out.append(check(stage, "returned_to_start", arm, worst(returns)))
    return out
