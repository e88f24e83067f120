"""Complete validation of a plan against a configuration, before any goal is sent.

The checks, per arm (in this order; each failure is a specific
:class:`~mj_manipulator_ros.core.errors.PlanError` naming arm, waypoint index, joint and value):

1. the arm is configured; its joints are exactly the configured ones (no unknown, duplicate or
   missing joint);
2. at least two waypoints (a single one moves nothing and has no segment to check);
3. every time, position, velocity and acceleration is finite;
4. ``time_from_start`` is >= 0 and strictly increasing; the plan is no longer than
   ``execution.max_plan_duration_s`` and has no more than ``max_plan_points`` waypoints (both
   checked before anything is sampled);
5. positions inside the joint limits, at the waypoints and on the spline between them;
6. velocities (when given) and finite-difference velocities within the velocity limits
   (a segment's mean speed never exceeds its peak speed, so the finite-difference check is sound
   whatever interpolation the controller uses);
7. the final velocity is zero (|v| <= float32 epsilon, as joint_trajectory_controller demands);

and across arms: 8. every arm uses the same time grid (to 1 ns, the message resolution).
"""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.core.config import ExecutorConfig, limit_or_inf
from mj_manipulator_ros.core.errors import (
    EmptyTrajectoryError, FinalVelocityError, JointLimitError, JointMismatchError,
    NonFiniteValueError, PlanCostError, PlanError, TimeGridMismatchError, TimeNotIncreasingError,
    SplineLimitError, UnknownArmError, UnresolvedLimitsError, VelocityLimitError)
from mj_manipulator_ros.core.interpolation import interpolation_of
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.spline_peaks import segment_peaks

#: joint_trajectory_controller rejects a final velocity above float epsilon.
FINAL_VELOCITY_EPS = float(np.finfo(np.float32).eps)
#: Times are compared at the resolution of builtin_interfaces/Duration.
TIME_RESOLUTION_S = 1e-9


def plan_problems(plan: MultiArmPlan, config: ExecutorConfig) -> list[PlanError]:
    """Every problem of the plan (empty when it is valid). Stops checking an arm at its first
    structural problem (joints, emptiness, non-finite or unordered times), since later checks
    would only repeat it."""
    problems: list[PlanError] = []
    if not plan.arms:
        return [PlanError(f"the plan has no arms; configured arms: {list(config.arm_names)}")]
    for arm_name, traj in plan.arms.items():
        if arm_name not in config.arm_names:
            problems.append(UnknownArmError(
                f"not configured; configured arms: {list(config.arm_names)}", arm=arm_name))
            continue
        problems.extend(_arm_problems(arm_name, traj, config))
    if not problems:
        problems.extend(_grid_problems(plan))
    return problems


def validate_plan(plan: MultiArmPlan, config: ExecutorConfig) -> None:
    """Raise the first problem of :func:`plan_problems`; return None when the plan is valid."""
    problems = plan_problems(plan, config)
    if problems:
        first = problems[0]
        if len(problems) > 1:
            first.args = (f"{first.args[0]} (and {len(problems) - 1} more problem(s))",)
        spline = [p.speed_factor for p in problems if isinstance(p, SplineLimitError)]
        if spline:
            first.args = (f"{first.args[0]}; the whole plan passes the spline limits at a speed "
                          f"factor of {min(spline):.3g} or less (time_scaled / --speed)",)
        raise first


def _arm_problems(arm: str, t: ArmTrajectory, config: ExecutorConfig) -> list[PlanError]:
    cfg = config.arm(arm)
    if cfg.limits_from_model:
        return [UnresolvedLimitsError(
            "joint_limits: from_model has not been read from the MuJoCo model; expected a "
            "configuration passed through mj_manipulator_ros.model.limits.with_model_limits",
            arm=arm)]
    expected, got = list(cfg.joint_names), list(t.joint_names)
    dup = sorted({j for j in got if got.count(j) > 1})
    if dup:
        return [JointMismatchError(f"duplicate joint(s) {dup}; expected each of {expected} once",
                                   arm=arm, joint=dup[0])]
    unknown = [j for j in got if j not in expected]
    if unknown:
        return [JointMismatchError(f"unknown joint(s) {unknown}; the arm's joints are {expected}",
                                   arm=arm, joint=unknown[0])]
    missing = [j for j in expected if j not in got]
    if missing:
        return [JointMismatchError(f"missing joint(s) {missing}; expected all of {expected}",
                                   arm=arm, joint=missing[0])]
    n = t.times.shape[0]
    if n < 2:
        return [EmptyTrajectoryError(
            f"the trajectory has {'no waypoints' if n == 0 else '1 waypoint'}; expected at least two (the "
            "start, where the arm is, and where it goes)", arm=arm, value=n)]

    problems: list[PlanError] = []
    s = config.execution
    if n > s.max_plan_points:
        return [PlanCostError(f"{n} waypoints, more than execution.max_plan_points = "
                              f"{s.max_plan_points}", arm=arm, value=n)]
    bad_t = np.flatnonzero(~np.isfinite(t.times))
    if bad_t.size:
        i = int(bad_t[0])
        return [NonFiniteValueError(f"time_from_start is {t.times[i]}; expected a finite number",
                                    arm=arm, index=i, value=float(t.times[i]))]
    for what in ("positions", "velocities", "accelerations"):
        a = getattr(t, what)
        if a is None:
            continue
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            i, j = (int(x) for x in bad[0])
            problems.append(NonFiniteValueError(
                f"{what[:-1] if what != 'velocities' else 'velocity'} is {a[i, j]}; expected a "
                "finite number", arm=arm, index=i, joint=t.joint_names[j], value=float(a[i, j])))
    if problems:
        return problems
    if t.times[0] < 0:
        return [TimeNotIncreasingError(f"time_from_start is {t.times[0]} s; expected >= 0",
                                       arm=arm, index=0, value=float(t.times[0]))]
    if t.times[-1] > s.max_plan_duration_s:
        return [PlanCostError(
            f"the plan lasts {t.times[-1]:.6g} s (after any speed factor), more than "
            f"execution.max_plan_duration_s = {s.max_plan_duration_s:g} s", arm=arm,
            index=n - 1, value=float(t.times[-1]))]
    steps = np.diff(t.times)
    bad = np.flatnonzero(steps < TIME_RESOLUTION_S)
    if bad.size:
        i = int(bad[0]) + 1
        return [TimeNotIncreasingError(
            f"time_from_start {t.times[i]} s is not after the previous waypoint's "
            f"{t.times[i - 1]} s; expected strictly increasing times", arm=arm, index=i,
            value=float(t.times[i]))]

    for j, joint in enumerate(t.joint_names):
        lim = cfg.joint_limits.get(joint)
        lo, hi = limit_or_inf(lim, "lower"), limit_or_inf(lim, "upper")
        col = t.positions[:, j]
        out = np.flatnonzero((col < lo) | (col > hi))
        if out.size:
            i = int(out[0])
            problems.append(JointLimitError(
                f"position {col[i]:.6g} is outside the limits [{lo:.6g}, {hi:.6g}]",
                arm=arm, index=i, joint=joint, value=float(col[i])))
        vmax = limit_or_inf(lim, "velocity") if lim is not None else np.inf
        if np.isfinite(vmax):
            if t.velocities is not None:
                v = t.velocities[:, j]
                over = np.flatnonzero(np.abs(v) > vmax)
                if over.size:
                    i = int(over[0])
                    problems.append(VelocityLimitError(
                        f"velocity {v[i]:.6g} exceeds the limit {vmax:.6g}", arm=arm, index=i,
                        joint=joint, value=float(v[i])))
            if n > 1:
                fd = np.diff(col) / steps
                over = np.flatnonzero(np.abs(fd) > vmax * (1 + 1e-9))
                if over.size:
                    i = int(over[0]) + 1
                    problems.append(VelocityLimitError(
                        f"moving from waypoint {i - 1} to {i} needs a mean velocity of "
                        f"{fd[i - 1]:.6g}, above the limit {vmax:.6g}; slow the plan down "
                        "(time_scaled) or re-time it", arm=arm, index=i, joint=joint,
                        value=float(fd[i - 1])))
    problems.extend(_spline_problems(arm, t, cfg))
    if t.velocities is not None:
        last = t.velocities[-1]
        moving = np.flatnonzero(np.abs(last) > FINAL_VELOCITY_EPS)
        if moving.size:
            j = int(moving[0])
            problems.append(FinalVelocityError(
                f"final velocity is {last[j]:.6g}; expected 0 (the controller rejects a "
                "trajectory that ends moving)", arm=arm, index=n - 1, joint=t.joint_names[j],
                value=float(last[j])))
    return problems


def _spline_problems(arm: str, t: ArmTrajectory, cfg) -> list[PlanError]:
    """The executed reference between waypoints (JTC's spline) against position, velocity and
    acceleration limits: the first violating segment per joint and limit."""
    limits = [cfg.joint_limits.get(j) for j in t.joint_names]
    vmax = np.array([limit_or_inf(lim, "velocity") if lim else np.inf for lim in limits])
    amax = np.array([lim.acceleration if lim and lim.acceleration is not None else np.inf
                     for lim in limits])
    bounded = [lim is not None and (lim.lower is not None or lim.upper is not None)
               for lim in limits]
    if t.times.size < 2 or not (np.isfinite(vmax).any() or np.isfinite(amax).any()
                                or any(bounded)):
        return []
    peaks = segment_peaks(t)
    kind = interpolation_of(t).value
    problems: list[PlanError] = []
    lower = np.array([limit_or_inf(lim, "lower") for lim in limits])
    upper = np.array([limit_or_inf(lim, "upper") for lim in limits])
    slack = 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(upper), upper, 1.0)))
    for bound, peak, over in (("upper", peaks.position_max, peaks.position_max > upper + slack),
                              ("lower", peaks.position_min, peaks.position_min < lower - slack)):
        for j in np.flatnonzero(over.any(axis=0)):
            k = int(np.flatnonzero(over[:, j])[0])
            limit = upper[j] if bound == "upper" else lower[j]
            problems.append(JointLimitError(
                f"segment {k}->{k + 1}: the controller's {kind} spline reaches {peak[k, j]:.6g} "
                f"between the waypoints, beyond the {bound} limit {limit:.6g} (both waypoints "
                "are within it); time scaling keeps the path: lower the waypoint velocities "
                "there or add a waypoint", arm=arm, index=k, joint=t.joint_names[j],
                value=float(peak[k, j])))
    for what, peak, limit, root in (("velocity", peaks.velocity, vmax, 1.0),
                                    ("acceleration", peaks.acceleration, amax, 0.5)):
        over = peak > limit[None, :] * (1 + 1e-9)
        for j in np.flatnonzero(over.any(axis=0)):
            k = int(np.flatnonzero(over[:, j])[0])
            factor = float((limit[j] / peak[k, j]) ** root)
            unit = "per s" if what == "velocity" else "per s^2"
            problems.append(SplineLimitError(
                f"segment {k}->{k + 1}: the controller's {kind} spline peaks at a {what} of "
                f"{peak[k, j]:.4g} {unit}, above the limit {limit[j]:.4g}; a speed factor of "
                f"{factor:.3g} or less passes this segment", speed_factor=factor, arm=arm,
                index=k, joint=t.joint_names[j], value=float(peak[k, j])))
    return problems


def _grid_problems(plan: MultiArmPlan) -> list[PlanError]:
    names = list(plan.arms)
    ref_name = names[0]
    ref = plan.arms[ref_name].times
    problems: list[PlanError] = []
    for name in names[1:]:
        times = plan.arms[name].times
        if times.shape != ref.shape:
            problems.append(TimeGridMismatchError(
                f"has {times.size} waypoints but arm {ref_name!r} has {ref.size}; the arms must "
                "share one time grid (see resample_to_common_grid)", arm=name))
            continue
        diff = np.flatnonzero(np.abs(times - ref) > TIME_RESOLUTION_S)
        if diff.size:
            i = int(diff[0])
            problems.append(TimeGridMismatchError(
                f"time_from_start {times[i]} s differs from arm {ref_name!r}'s {ref[i]} s; the "
                "arms must share one time grid (see resample_to_common_grid)", arm=name, index=i,
                value=float(times[i])))
    return problems


def check_speed_factor(factor: float, config: ExecutorConfig) -> float:
    """A speed factor in [``execution.min_speed_factor``, 1]; returns it.

    Raises:
        PlanCostError: below the minimum (or not a finite number in range).
    """
    lo = config.execution.min_speed_factor
    if not (np.isfinite(factor) and lo <= factor <= 1.0):
        raise PlanCostError(f"speed factor {factor!r}: expected a number in [{lo:g}, 1] "
                            f"(execution.min_speed_factor = {lo:g})", value=factor)
    return float(factor)
