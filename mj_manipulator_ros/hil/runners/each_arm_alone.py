"""Stage 4: each arm runs each shipped plan by itself, where that is collision-free."""

from __future__ import annotations

from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check, not_applicable, report_detail
from mj_manipulator_ros.hil.motions import approach, with_holds
from mj_manipulator_ros.hil.shipped_plans import shipped_plans
from mj_manipulator_ros.hil.stages import Protocol, Stage
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def each_arm_alone(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """Each arm runs each shipped plan by itself where that is collision-free; every arm must
    have run at least one plan alone (otherwise its run is not measured: the stage blocks)."""
    speed = stage.params["speed"]
    out = []
    ran = {arm: 0 for arm in session.config.arm_names}
    for name, plan in shipped_plans(session.config).items():
        for arm in plan.arm_names:
            subject = f"{name}/{arm}"
            alone = session.checker.check(timeline=with_holds(session, plan.subset([arm])),
                                          mode="recorded")
            if not alone.collision_free:
                out.append(not_applicable(stage, "alone_succeeded", subject,
                                          float(alone.colliding_states),
                                          "collides when run alone (" +
                                          alone.summary().splitlines()[0] + ")"))
                continue
            error = approach(session, plan, [arm])
            if error:
                out.append(check(stage, "alone_succeeded", subject, 0.0, error, passed=False))
                continue
            run = plan.subset([arm]).time_scaled(speed)
            report, samples = session.run(run)
            ran[arm] += 1
            out.append(check(stage, "alone_succeeded", subject, float(report.succeeded),
                             report_detail(report), passed=report.succeeded))
            s = samples.arm(session.config.arm(arm).joint_names)
            out.append(check(stage, "tracking_error", subject,
                             A.tracking_error(s, run[arm], report.start_stamp)
                             if report.start_stamp else None))
    for arm, n in ran.items():
        if n == 0:
            out.append(check(stage, "alone_succeeded", arm, None,
                             "no shipped plan could run with this arm alone: nothing measured"))
    return out
