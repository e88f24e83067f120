"""Stage 0: configuration, model and shipped plans agree, before anything is powered."""

from __future__ import annotations

from mj_manipulator_ros.check.failure_band import failure_band
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.core.config import ExecutorConfig, limit_or_inf
from mj_manipulator_ros.core.errors import MjManipulatorError, PlanError
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.hil.check_result import CheckResult, check, not_applicable
from mj_manipulator_ros.hil.shipped_plans import shipped_plans
from mj_manipulator_ros.hil.stages import Protocol, Stage
from mj_manipulator_ros.model.scene import scene_for


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
    try:
        plans = shipped_plans(config)
    except PlanError as exc:   # none given, none shipped fits, and none can be made
        out.append(check(stage, "plans_valid", "hil.plans", 0.0, str(exc), passed=False))
        plans = {}
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
