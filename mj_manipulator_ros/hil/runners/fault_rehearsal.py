"""Stage 6: one arm fails mid-motion; every other arm stops, confirmed."""

from __future__ import annotations

from typing import Callable

from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import ArmStatus
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check, report_detail
from mj_manipulator_ros.hil.motions import approach, out_and_back
from mj_manipulator_ros.hil.shipped_plans import shipped_plans
from mj_manipulator_ros.hil.stages import Protocol, Stage
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def fault_rehearsal(session: "HilSession", stage: Stage, protocol: Protocol,
                    announce: Callable[[str], None] = print) -> list[CheckResult]:
    p = stage.params
    threshold = protocol.settings["speed_threshold_rad_s"]
    plans = shipped_plans(session.config)
    name, plan = next(iter(plans.items())) if plans else (None, None)
    if plan is None:  # no plan: a synchronized out-and-back of every arm
        parts = [out_and_back(session, a, 0.15, 2.0) for a in session.config.arm_names]
        plan, name = MultiArmPlan({a: pt[a] for a, pt in zip(session.config.arm_names, parts)}), "out_and_back"
    fault_arm = p["fault_arm"] if p["fault_arm"] in plan.arm_names else plan.arm_names[-1]
    error = approach(session, plan, plan.arm_names)
    if error:
        return [check(stage, "failure_detected", name, 0.0, error, passed=False)]
    run = plan.time_scaled(p["speed"])
    fault_at = p["fault_at_fraction"] * run.duration
    if session.sim_node is not None:
        session.set_fault(fault_arm, abort_after_s=fault_at)
    else:
        announce(f"stage 6: trigger a fault on arm {fault_arm!r} (only that arm) about "
                 f"{fault_at:.1f} s after the motion starts (e.g. its controller's stop)")
    try:
        with session.paced(protocol.settings["sim_latency_real_time_factor"]):
            report, samples = session.run(run, settle=1.0)
    finally:
        if session.sim_node is not None:
            session.set_fault(fault_arm, abort_after_s=None)
    f = report.first_failure
    detected = f is not None and f.arm == fault_arm  # the faulted arm, on hardware too
    out = [check(stage, "failure_detected", name, float(detected), report_detail(report),
                 passed=detected)]
    failing = f.arm if detected else fault_arm
    t_fail = report.arms[failing].result_at if detected else None
    for arm in run.arm_names:
        if arm == failing:
            continue
        s = samples.arm(session.config.arm(arm).joint_names)
        latency = A.stop_time(s, t_fail, threshold) if t_fail is not None else None
        out.append(check(stage, "peers_stopped", arm, latency))
        r = report.arms[arm]
        confirmed = r.stop_confirmed and (r.status is not ArmStatus.UNCONFIRMED_STOP)
        out.append(check(stage, "stops_confirmed", arm, float(confirmed),
                         f"{r.status.value}: {r.error_string}", passed=confirmed))
    return out
