"""Stage 3: cancels at points of a motion (latency, run-on) and a controlled stop against the
executor's prediction."""

from __future__ import annotations

import threading

import numpy as np

from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import StopKind
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check, report_detail
from mj_manipulator_ros.hil.motions import one_way, return_to
from mj_manipulator_ros.hil.stages import Protocol, Stage
from mj_manipulator_ros.sim.sim_config import sim_config
from mj_manipulator_ros.sim.stop_settle import predict_stop_settle
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def stop_latency(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """Each arm: a cancel at each of ``fractions`` of a one-way motion (latency, and how far
    past the cancel it came to rest, against ``execution.hold_overshoot_s``, which the
    pre-flight gate's stop band assumes), then a controlled stop at each of
    ``controlled_fractions``: the measured stop against the executor's prediction (its settle
    time predicted on the robot's model, ``sim/stop_settle.py``). With
    --sim the stops run at ``settings.sim_latency_real_time_factor`` (real time): their
    figures are latencies, which a faster simulator would multiply."""
    p = stage.params
    threshold = protocol.settings["speed_threshold_rad_s"]
    hold_bound = session.config.execution.hold_overshoot_s
    pace = protocol.settings["sim_latency_real_time_factor"]
    # the robot's simulation, for the controlled stop's prediction (faults left out there)
    model = sim_config(session.config) if "scene" in session.config.extra else None
    out = []
    for arm in session.config.arm_names:
        start = session.pose(arm)
        joints = session.config.arm(arm).joint_names
        for fraction in p["fractions"]:
            subject = f"{arm}@{int(round(fraction * 100))}%"
            plan = one_way(session, arm, p["amplitude_rad"], p["duration_s"]).time_scaled(p["speed"])
            with session.paced(pace):
                report, samples = _run_and_stop(session, plan, fraction, controlled=False)
            r = report.arms[arm]
            confirmed = r.stop_confirmed and r.cancel_acknowledged_at is not None
            out.append(check(stage, "cancel_confirmed", subject, float(confirmed),
                             report_detail(report), passed=confirmed))
            s = samples.arm(joints)
            asked = r.cancel_requested_at
            latency = A.stop_time(s, asked, threshold) if asked else None
            out.append(check(stage, "stop_latency", subject, latency))
            out.append(_allowance(stage, session, arm, "hold_settle", subject, latency))
            overshoot = None
            if asked and report.start_stamp is not None:
                # how long the arm ran on along the motion past the cancel request: at full
                # speed it runs on that much plan time (a latency and a servo's settling do
                # not scale with the speed)
                rest = A.progress_at_rest(s, plan[arm])
                overshoot = rest - (asked - report.start_stamp)
            out.append(check(stage, "hold_overshoot", subject, overshoot,
                             f"execution.hold_overshoot_s {hold_bound:g} s",
                             threshold=hold_bound))
            return_to(session, {arm: start})
        for fraction in p["controlled_fractions"]:
            subject = f"{arm}@{int(round(fraction * 100))}% controlled"
            plan = one_way(session, arm, p["amplitude_rad"], p["duration_s"]).time_scaled(p["speed"])
            with session.paced(pace):
                report, samples = _run_and_stop(session, plan, fraction, controlled=True)
            stopped = report.arms[arm].stop is StopKind.CONTROLLED and len(report.stops) == 1
            out.append(check(stage, "controlled_stop_confirmed", subject, float(stopped),
                             report_detail(report), passed=stopped))
            time_error = distance_error = settle_past = None
            if stopped:
                record = report.stops[0]
                s = samples.arm(joints)
                # the arm's own catch-up: from its reference standing to the arm at rest
                settle_past = A.stop_time(s, record.stamp + record.ramp_s, threshold)
                # from the ramp's stamp, the time both the goals and the joint states are
                # on (the request's own time is this process's reading of the clock)
                settle = p["settle_rad"]
                measured_time = A.settle_time(s, record.stamp, settle)
                reference_time = A.predicted_settle_time(
                    plan[arm], record.stamp, record.plan_time_stamp, record.ramp_s, settle)
                if model is not None:   # the arm's own catch-up, on its model
                    predicted_time = predict_stop_settle(
                        model, arm, plan[arm], record.plan_time_stamp, record.ramp_s, settle,
                        {a: session.pose(a) for a in session.config.arm_names if a != arm})
                    on = (f"predicted {predicted_time:.3f} s on the robot's model (its "
                          f"reference stands at {reference_time:.3f} s)")
                else:
                    predicted_time = reference_time
                    on = (f"predicted {predicted_time:.3f} s on the reference (no scene in the "
                          "configuration: the arm's catch-up is not predicted)")
                time_error = abs(measured_time - predicted_time)
                rest, _, _ = sample(plan[arm], [record.plan_time_end])
                distance_error = float(np.max(np.abs(s.positions[-1] - rest[0]))) \
                    if len(s) else None
                time_detail = (f"from the ramp's stamp: measured {measured_time:.3f} s, {on} "
                               f"(ramp {record.ramp_s:.3f} s)")
                travel_detail = (f"at rest at plan time {record.plan_time_end:.3f} s; travel "
                                 f"measured {A.travel_after(s, record.requested_at):.4f}, "
                                 f"predicted {record.travel[arm]:.4f} (from where the reference "
                                 "was at the request)")
            else:
                time_detail = travel_detail = "no controlled stop"
            out.append(check(stage, "controlled_stop_time_error", subject, time_error,
                             time_detail))
            out.append(check(stage, "controlled_stop_position_error", subject, distance_error,
                             travel_detail))
            out.append(_allowance(stage, session, arm, "stop_settle", subject, settle_past))
            return_to(session, {arm: start})
    from mj_manipulator_ros.hil.stop_table_run import table_rows

    # the table's figures are the stops' own (simulated time, the lead scaled with the pace):
    # not latencies, so they run at the rehearsal's pace
    out += table_rows(session, stage, protocol, _run_and_stop)
    return out


def _allowance(stage: Stage, session: "HilSession", arm: str, name: str, subject: str,
               measured) -> CheckResult:
    """``measured`` against ``execution.<name>_s``, the stop limits' allowance for the arm's
    own response (``check/stop_envelope.py``): judged when a stop limit is set for ``arm``;
    without one the figure is recorded (what to set before setting a limit) and passes."""
    setting = f"{name}_s"
    allowed = getattr(session.config.execution, setting)
    if any(v is not None for v in session.config.stop_limits(arm)):
        return check(stage, name, subject, measured,
                     f"execution.{setting} {allowed:g} s (a stop limit is set for {arm!r}: the "
                     "gate counts on it)", threshold=allowed)
    return check(stage, name, subject, measured,
                 f"execution.{setting} {allowed:g} s; no stop limit is set for {arm!r}, so "
                 "nothing counts on it: set it to at least the measured figure before setting "
                 "max_stop_time_s", passed=True)


def _run_and_stop(session: "HilSession", plan: MultiArmPlan, fraction: float, controlled: bool):
    """Run the plan and stop it at ``fraction`` of its duration (controllers' clock): a cancel
    (abort), or the controlled stop along the plan."""
    result = {}

    def run() -> None:
        try:
            result.update(zip(("report", "samples"), session.run(plan)))
        except BaseException as exc:  # noqa: BLE001 - raised again in the stage's thread
            result["error"] = exc

    runner = threading.Thread(target=run)
    runner.start()
    while session.executor.current_stamp is None and runner.is_alive():
        runner.join(0.002)
    stamp = session.executor.current_stamp
    if stamp is not None:
        when = stamp.seconds + fraction * plan.duration
        while session.now() < when and runner.is_alive():
            runner.join(0.002)
        why = f"bring-up stop test at {fraction:.0%} of the motion"
        if controlled:
            session.executor.stop(why)
        else:
            session.executor.abort(why)
    runner.join(timeout=plan.duration * 10 + 30)
    if "error" in result:   # refused before anything moved (a stop limit no speed fits, ...)
        raise result["error"]
    if runner.is_alive():
        raise RuntimeError(f"the stop test's motion did not end within "
                           f"{plan.duration * 10 + 30:.0f} s")
    return result["report"], result["samples"]
