"""What each bring-up stage does and measures. Thresholds come from hil/stages.yaml only.

Each runner is named for what its stage checks (the stage's ``id`` or ``runner`` in
hil/stages.yaml, looked up in :data:`RUNNERS`) and returns :class:`CheckResult`s; the stage
passes when every one passes. Motions come from :mod:`mj_manipulator_ros.hil.motions`.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional

import numpy as np

from mj_manipulator_ros.check.failure_band import failure_band
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.core.config import ExecutorConfig, limit_or_inf
from mj_manipulator_ros.core.errors import MjManipulatorError
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.report import ArmStatus, ExecutionReport, StopKind
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.motions import approach, one_way, out_and_back, return_to, with_holds
from mj_manipulator_ros.hil.stages import Protocol, Stage
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import share_dir

if TYPE_CHECKING:  # the session imports rclpy; stage 0 runs without one
    from mj_manipulator_ros.hil.session import HilSession


class CheckStatus(str, enum.Enum):
    """How a check ended. Only ``passed`` and ``not_applicable`` let a stage pass."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_MEASURED = "not_measured"      # nothing was measured: blocks the stage
    NOT_APPLICABLE = "not_applicable"  # the check does not apply, for a measured reason


@dataclass(frozen=True)
class CheckResult:
    stage: int
    name: str
    subject: str            # arm, plan, "plan/arm", or "" for the whole setup
    measured: Optional[float]
    threshold: Optional[float]
    unit: str
    status: CheckStatus
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Does this check let its stage pass?"""
        return self.status in (CheckStatus.PASSED, CheckStatus.NOT_APPLICABLE)

    def to_dict(self) -> dict:
        return {"stage": self.stage, "name": self.name, "subject": self.subject,
                "measured": None if self.measured is None or not np.isfinite(self.measured)
                else float(self.measured), "threshold": self.threshold, "unit": self.unit,
                "pass": self.passed, "status": self.status.value, "detail": self.detail}


def check(stage: Stage, name: str, subject: str, measured: Optional[float], detail: str = "",
          passed: Optional[bool] = None, threshold: Optional[float] = None) -> CheckResult:
    """A check of ``stage``: ``measured`` against its threshold (``threshold`` where the figure
    comes from the setup, not ``hil/stages.yaml``; or ``passed`` given). A value that was not
    measured (None or NaN) is ``not_measured`` and blocks the stage."""
    spec = stage.check(name)
    if threshold is not None:
        spec = dataclasses.replace(spec, threshold=threshold)
    if measured is None or (isinstance(measured, float) and np.isnan(measured)):
        status = CheckStatus.NOT_MEASURED
    else:
        ok = spec.passes(measured) if passed is None else passed
        status = CheckStatus.PASSED if ok else CheckStatus.FAILED
    return CheckResult(stage.number, name, subject, measured, spec.threshold, spec.unit, status,
                       detail)


def worst(values: Iterable[Optional[float]]) -> Optional[float]:
    """The largest of measurements aggregated over runs or arms; None (not measured) when any
    of them was not measured (None or NaN): an aggregate never turns "nothing measured" into a
    figure (``max(0.0, nan)`` is 0.0)."""
    out = None
    for v in values:
        if v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)):
            return None
        out = float(v) if out is None else max(out, float(v))
    return out


def not_applicable(stage: Stage, name: str, subject: str, measured: float, detail: str) -> CheckResult:
    """A check that does not apply, with the measurement that says so (e.g. colliding states)."""
    spec = stage.check(name)
    return CheckResult(stage.number, name, subject, measured, spec.threshold, spec.unit,
                       CheckStatus.NOT_APPLICABLE, detail)


def shipped_plans(config: ExecutorConfig) -> dict[str, MultiArmPlan]:
    """The plans the setup is brought up for: ``hil.plans`` in the config (paths relative to the
    config file), else every plan in config/plans/ whose arms are all configured."""
    hil = config.extra.get("hil") or {}
    base = Path(config.source).resolve().parent if config.source else Path.cwd()
    if "plans" in hil:
        paths = [Path(p) if Path(p).is_absolute() else base / p for p in hil["plans"]]
    else:
        paths = sorted((share_dir() / "config" / "plans").glob("*.yaml"))
    plans = {}
    for p in paths:
        plan = load_plan(p)
        if "plans" in hil or set(plan.arm_names) <= set(config.arm_names):
            plans[p.stem] = plan
    return plans


# ---- offline ----------------------------------------------------------------------------------
def offline_consistency(config: ExecutorConfig, stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """Stage without a robot: configuration, model and shipped plans agree."""
    out = []
    try:
        scene = scene_for(config)
        for arm in scene.arms.values():
            arm.position_servos()
    except MjManipulatorError as exc:
        return [check(stage, "config_matches_model", "", 0.0, str(exc), passed=False)]
    out.append(check(stage, "config_matches_model", "", 1.0, "every joint bound", passed=True))
    for arm in config.arms:
        b = scene.arms[arm.name]
        excess, where = 0.0, ""
        for k, j in enumerate(arm.joint_names):
            lim = arm.joint_limits.get(j)
            lo, hi = limit_or_inf(lim, "lower"), limit_or_inf(lim, "upper")
            e = max(b.lower[k] - lo, hi - b.upper[k], 0.0)
            if e > excess:
                excess, where = e, f"{j}: configured [{lo:g}, {hi:g}] vs model [{b.lower[k]:g}, {b.upper[k]:g}]"
        out.append(check(stage, "limits_within_model", arm.name, excess, where))
    plans = shipped_plans(config)
    checker = PlanReplayChecker.from_scene(scene) if plans else None
    for name, plan in plans.items():
        try:
            validate_plan(plan, config)
        except MjManipulatorError as exc:
            out.append(check(stage, "plans_valid", name, 0.0, str(exc), passed=False))
            continue
        out.append(check(stage, "plans_valid", name, 1.0, passed=True))
        report = checker.check(plan, mode="synchronized")
        bad = report.colliding_states + report.between_state_collisions + report.uncertified_intervals
        out.append(check(stage, "plans_collision_free", name, float(bad),
                         report.summary().splitlines()[0]))
        if len(plan.arm_names) > 1:
            try:
                need = failure_band(plan, config)
            except MjManipulatorError as exc:
                out.append(check(stage, "plans_band_clear", name, 0.0, str(exc), passed=False))
                continue
            band = checker.check(plan, mode="band", skew=need.skew_s)
            bad = band.colliding_states + band.between_state_collisions + band.uncertified_intervals \
                + band.contact_overflow_states
            out.append(check(stage, "plans_band_clear", name, float(bad),
                             band.summary().splitlines()[0] + f"; band set by {need.set_by}"))
        else:
            out.append(not_applicable(stage, "plans_band_clear", name, float(len(plan.arm_names)),
                                      "one arm: no band"))
    return out


# ---- connected, no motion ---------------------------------------------------------------------
def connected(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    out = []
    wait = session.config.execution.server_wait_s
    for arm, channel in session.executor.channels.items():
        ok = channel.client.wait_for_server(timeout_sec=wait)
        out.append(check(stage, "action_server", arm, float(ok),
                         f"{channel.arm.action_name} {'answers' if ok else f'not available within {wait} s'}",
                         passed=ok))
    session.sleep(stage.params["listen_s"])
    samples = session.joint_states.samples()
    for arm in session.config.arms:
        s = samples.arm(arm.joint_names)
        lo, hi = session.limits(arm.name)
        out.append(check(stage, "joint_states_rate", arm.name, A.rate_hz(s),
                         f"{len(s)} messages carrying all of {list(arm.joint_names)}"))
        out.append(check(stage, "positions_in_limits", arm.name,
                         A.limit_excess(s.positions[-1:], lo, hi) if len(s) else float("nan")))
        out.append(check(stage, "clock_offset", arm.name, abs(A.clock_offset(s))))
    out.extend(_gravity_consistency(session, stage, samples))
    return out


def _gravity_consistency(session: "HilSession", stage: Stage, samples) -> list[CheckResult]:
    """Each arm's efforts at rest against the model's gravity load at its measured pose
    (``hil/gravity_check.py``), with the single-joint fault that explains a residual."""
    from mj_manipulator_ros.hil.gravity_check import GravityModel, at_rest, describe

    threshold = stage.check("gravity_consistency").threshold
    if session.sim_node is not None:
        scene = session.sim_node.scene
    elif "scene" in session.config.extra:
        scene = scene_for(session.config)
    else:
        return [not_applicable(stage, "gravity_consistency", a, 0.0,
                               "no scene section: no model to weigh the arm with")
                for a in session.config.arm_names]
    out, rest = [], {}
    for arm in session.config.arms:
        s = samples.arm(arm.joint_names)
        if len(s) and s.efforts is not None and not np.isnan(s.efforts).all():
            rest[arm.name] = at_rest(s.positions, s.efforts)
    models = {a: GravityModel(scene, a) for a in rest}
    for arm in session.config.arms:
        if arm.name not in rest:
            out.append(not_applicable(stage, "gravity_consistency", arm.name, 0.0,
                                      "the joint states carry no efforts"))
            continue
        q, effort = rest[arm.name]
        gravity = models[arm.name]
        result = gravity.residual(q, effort)
        detail = ""
        if result.worst > threshold:
            # another arm's joints answering to this arm's names (CAN naming crossed)?
            crossed = [b for b, m in models.items() if b != arm.name
                       and len(m.joint_names) == len(gravity.joint_names)
                       and m.residual(q, effort).worst <= threshold]
            if crossed:
                detail = (f"; explained by: arms crossed: {arm.name}'s joint states and "
                          f"efforts are those of {crossed[0]}'s joints (its controller drives "
                          f"arm {crossed[0]})")
            else:
                result = gravity.diagnose(q, effort)
        out.append(check(stage, "gravity_consistency", arm.name, result.worst,
                         describe(arm.name, result, threshold, arm.joint_names) + detail))
    return out


# ---- shared -----------------------------------------------------------------------------------
def _report_detail(report: ExecutionReport) -> str:
    return report.summary().replace("\n", " | ")


# ---- one arm, small motion ----------------------------------------------------------------------
def small_motion(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    p = stage.params
    out = []
    for arm in session.config.arm_names:
        start = session.pose(arm)
        plan = out_and_back(session, arm, p["amplitude_rad"], p["duration_s"]).time_scaled(p["speed"])
        clean, tracks, returns, detail = 0, [], [], ""
        for run in range(int(p["runs"])):
            report, samples = session.run(plan)
            s = samples.arm(session.config.arm(arm).joint_names)
            track = A.tracking_error(s, plan[arm], report.start_stamp) if report.start_stamp else np.inf
            back = float(np.max(np.abs(session.pose(arm) - start)))
            tracks.append(track)
            returns.append(back)
            ok = (report.succeeded and track <= stage.check("tracking_error").threshold
                  and back <= stage.check("returned_to_start").threshold)
            if not ok:
                detail = f"run {run + 1}: " + _report_detail(report)
                break
            clean += 1
        out.append(check(stage, "clean_runs", arm, float(clean), detail))
        out.append(check(stage, "tracking_error", arm, worst(tracks)))
        out.append(check(stage, "returned_to_start", arm, worst(returns)))
    return out


# ---- stop latency -------------------------------------------------------------------------------
def stop_latency(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """Each arm: a cancel at each of ``fractions`` of a one-way motion (latency, and how far
    past the cancel it came to rest, against ``execution.hold_overshoot_s``, which the
    pre-flight gate's stop band assumes), then a controlled stop at each of
    ``controlled_fractions``: the measured stop against the executor's prediction."""
    p = stage.params
    threshold = protocol.settings["speed_threshold_rad_s"]
    hold_bound = session.config.execution.hold_overshoot_s
    out = []
    for arm in session.config.arm_names:
        start = session.pose(arm)
        joints = session.config.arm(arm).joint_names
        for fraction in p["fractions"]:
            subject = f"{arm}@{int(round(fraction * 100))}%"
            plan = one_way(session, arm, p["amplitude_rad"], p["duration_s"]).time_scaled(p["speed"])
            report, samples = _run_and_stop(session, plan, fraction, controlled=False)
            r = report.arms[arm]
            confirmed = r.stop_confirmed and r.cancel_acknowledged_at is not None
            out.append(check(stage, "cancel_confirmed", subject, float(confirmed),
                             _report_detail(report), passed=confirmed))
            s = samples.arm(joints)
            asked = r.cancel_requested_at
            latency = A.stop_time(s, asked, threshold) if asked else None
            out.append(check(stage, "stop_latency", subject, latency))
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
            report, samples = _run_and_stop(session, plan, fraction, controlled=True)
            stopped = report.arms[arm].stop is StopKind.CONTROLLED and len(report.stops) == 1
            out.append(check(stage, "controlled_stop_confirmed", subject, float(stopped),
                             _report_detail(report), passed=stopped))
            time_error = distance_error = None
            if stopped:
                record = report.stops[0]
                s = samples.arm(joints)
                # from the ramp's stamp, the time both the goals and the joint states are
                # on (the request's own time is this process's reading of the clock)
                settle = p["settle_rad"]
                measured_time = A.settle_time(s, record.stamp, settle)
                predicted_time = A.predicted_settle_time(
                    plan[arm], record.stamp, record.plan_time_stamp, record.ramp_s, settle)
                time_error = abs(measured_time - predicted_time)
                rest, _, _ = sample(plan[arm], [record.plan_time_end])
                distance_error = float(np.max(np.abs(s.positions[-1] - rest[0]))) \
                    if len(s) else None
                time_detail = (f"from the ramp's stamp: measured {measured_time:.3f} s, predicted "
                               f"{predicted_time:.3f} s (ramp {record.ramp_s:.3f} s)")
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
            return_to(session, {arm: start})
    return out


def _run_and_stop(session: "HilSession", plan: MultiArmPlan, fraction: float, controlled: bool):
    """Run the plan and stop it at ``fraction`` of its duration (controllers' clock): a cancel
    (abort), or the controlled stop along the plan."""
    result = {}
    runner = threading.Thread(target=lambda: result.update(zip(("report", "samples"),
                                                               session.run(plan))))
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
    return result["report"], result["samples"]


# ---- each arm alone, synchronized, soak -----------------------------------------------------------
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
                             _report_detail(report), passed=report.succeeded))
            s = samples.arm(session.config.arm(arm).joint_names)
            out.append(check(stage, "tracking_error", subject,
                             A.tracking_error(s, run[arm], report.start_stamp)
                             if report.start_stamp else None))
    for arm, n in ran.items():
        if n == 0:
            out.append(check(stage, "alone_succeeded", arm, None,
                             "no shipped plan could run with this arm alone: nothing measured"))
    return out


def synchronized_run(session: "HilSession", stage: Stage, protocol: Protocol, name: str, plan: MultiArmPlan,
                     speed: float, subject: str) -> list[CheckResult]:
    """Run a plan synchronized and measure success, start skew, overlap, tracking."""
    error = approach(session, plan, plan.arm_names)
    if error:
        return [check(stage, "synchronized_succeeded", subject, 0.0, error, passed=False)]
    run = plan.time_scaled(speed)
    report, samples = session.run(run)
    out = [check(stage, "synchronized_succeeded", subject, float(report.succeeded),
                 _report_detail(report), passed=report.succeeded)]
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


def soak(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """The stage named by ``checks_of`` (full speed), ``runs`` times."""
    runs = int(stage.params["runs"])
    repeated = protocol.by_id(stage.params["checks_of"])
    passed, skews, tracks, detail = 0, [], [], ""
    for run in range(runs):
        results = RUNNERS[repeated.runner_name](session, repeated, protocol)
        skews += [r.measured for r in results if r.name == "start_skew"]
        tracks += [r.measured for r in results if r.name == "tracking_error"]
        if all(r.passed for r in results):
            passed += 1
        elif not detail:
            bad = next(r for r in results if not r.passed)
            detail = f"run {run + 1}: {bad.name} {bad.subject}: {bad.detail or bad.measured}"
    return [check(stage, "runs_passed", "", float(passed), detail),
            check(stage, "start_skew", "", worst(skews) if skews else None),
            check(stage, "tracking_error", "", worst(tracks) if tracks else None)]


# ---- fault rehearsal ---------------------------------------------------------------------------
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
        report, samples = session.run(run, settle=1.0)
    finally:
        if session.sim_node is not None:
            session.set_fault(fault_arm, abort_after_s=None)
    f = report.first_failure
    detected = f is not None and f.arm == fault_arm  # the faulted arm, on hardware too
    out = [check(stage, "failure_detected", name, float(detected), _report_detail(report),
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


#: runner name (a stage's ``id`` or ``runner``) -> the runner of a stage with a session
RUNNERS: dict[str, Callable[..., list[CheckResult]]] = {
    "connected": connected, "small_motion": small_motion, "stop_latency": stop_latency,
    "each_arm_alone": each_arm_alone, "synchronized": synchronized,
    "fault_rehearsal": fault_rehearsal, "soak": soak}
#: runners that need no session (nothing is connected)
OFFLINE_RUNNERS = {"offline_consistency": offline_consistency}
