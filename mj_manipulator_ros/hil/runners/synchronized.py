"""Stages 5 and 7: every shipped plan with every arm together (start skew, overlap, tracking)."""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check, report_detail, worst
from mj_manipulator_ros.hil.motions import approach
from mj_manipulator_ros.hil.shipped_plans import shipped_plans
from mj_manipulator_ros.hil.stages import Protocol, Stage
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def synchronized_run(session: "HilSession", stage: Stage, protocol: Protocol, name: str, plan: MultiArmPlan,
                     speed: float, subject: str) -> list[CheckResult]:
    """Run a plan synchronized and measure success, start skew, overlap, tracking."""
    error = approach(session, plan, plan.arm_names)
    if error:
        return [check(stage, "synchronized_succeeded", subject, 0.0, error, passed=False)]
    run = plan.time_scaled(speed)
    report, samples = session.run(run)
    out = [check(stage, "synchronized_succeeded", subject, float(report.succeeded),
                 report_detail(report), passed=report.succeeded)]
    if report.start_stamp is None:
        return out
    onset_threshold = protocol.settings["onset_threshold_rad"]
    speed_threshold = protocol.settings["speed_threshold_rad_s"]
    late, tracks, masks, unmeasured = {}, [], {}, []
    for arm in run.arm_names:
        s = samples.arm(session.config.arm(arm).joint_names)
        planned = A.planned_onset(run[arm], onset_threshold)
        measured = A.onset(s, report.start_stamp, onset_threshold)
        if planned is not None and measured is not None:
            late[arm] = measured - (report.start_stamp + planned)
        else:
            unmeasured.append(arm)
        tracks.append(A.tracking_error(s, run[arm], report.start_stamp))
        w = s.window(report.start_stamp, report.start_stamp + run.duration)
        masks[arm] = (w.stamps, A.moving_mask(w.velocities, speed_threshold))
    detail = ", ".join(f"{a} onset {x * 1e3:+.1f} ms vs plan" for a, x in late.items())
    if unmeasured:  # an arm whose onset was not measured is never dropped silently
        detail += f"{'; ' if detail else ''}onset not measured for {unmeasured}"
    skew = A.start_skew(list(late.values())) if not unmeasured else None
    out.append(check(stage, "start_skew", subject, skew, detail))
    if len(masks) >= 2 and "both_moving_overlap" in {c.name for c in stage.checks}:
        planned = A.planned_overlap_s([run[a] for a in run.arm_names], speed_threshold)
        stamps = np.unique(np.concatenate([m[0] for m in masks.values()]))
        resampled = [np.interp(stamps, m[0], m[1].astype(float)) > 0.5 for m in masks.values()]
        measured = A.overlap_s(stamps, *resampled[:2])
        ratio = measured / planned if planned > 0 else 1.0
        out.append(check(stage, "both_moving_overlap", subject, ratio,
                         f"both moving {measured:.2f} s of {planned:.2f} s planned"))
    out.append(check(stage, "tracking_error", subject, worst(tracks)))
    return out


def synchronized(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """Every shipped plan, both arms together, at the stage's speed."""
    out = []
    for name, plan in shipped_plans(session.config).items():
        out += synchronized_run(session, stage, protocol, name, plan, stage.params["speed"], name)
    return out
