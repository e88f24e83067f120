"""A synchronized rest-to-rest move from measured poses to target poses, within the limits:
how an arm gets to a plan's first waypoint without the controller jumping there."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from mj_manipulator_ros.core.config import ExecutorConfig, limit_or_inf
from mj_manipulator_ros.core.interpolation import rest_to_rest
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.tolerances import GoalTolerances, JointTolerance, joint_row

#: waypoint spacing of an approach move, s
STEP_S = 0.02
#: a quintic rest-to-rest move peaks at this many times its mean speed
QUINTIC_PEAK = 1.875
#: the approach's goals ask each joint to end within this share of its start tolerance: the
#: plan's start check, a moment later, sees it there with margin for the reading's noise
GOAL_SHARE = 0.5


def approach_tolerances(config: ExecutorConfig, arms) -> dict[str, GoalTolerances]:
    """Per arm of ``arms``, what its approach goal asks the controller for: each joint with a
    start tolerance within :data:`GOAL_SHARE` of it at the end, within
    ``execution.approach_settle_s`` after the move's end (a joint without one: the controller's
    default)."""
    s = config.execution
    out = {}
    for arm in arms:
        cfg = config.arm(arm)
        tol = joint_row(cfg.start_tolerance, s.start_tolerance_rad, cfg.joint_names)
        out[arm] = GoalTolerances(
            goal=tuple(JointTolerance(j, GOAL_SHARE * float(t))
                       for j, t in zip(cfg.joint_names, tol) if t > 0),
            goal_time=s.approach_settle_s)
    return out


def approach_plan(config: ExecutorConfig, starts: Mapping[str, np.ndarray],
                  targets: Mapping[str, np.ndarray], speed_fraction: float = 0.25,
                  min_duration: float = 1.0) -> MultiArmPlan:
    """Every arm of ``targets`` from ``starts[arm]`` to ``targets[arm]`` (J,) on one time grid,
    quintic in time (rest to rest), slow enough that every joint's peak speed is at most
    ``speed_fraction`` of its velocity limit (1 rad/s or m/s where none is configured).

    Returns:
        A plan with positions and velocities (the controller runs cubic splines through the
        dense waypoints).
    """
    duration = min_duration
    for arm, q1 in targets.items():
        cfg = config.arm(arm)
        vmax = np.array([limit_or_inf(cfg.joint_limits.get(j), "velocity") for j in cfg.joint_names])
        vmax = np.where(np.isfinite(vmax), vmax, 1.0)
        dq = np.abs(np.asarray(q1, dtype=float) - np.asarray(starts[arm], dtype=float))
        duration = max(duration, float(np.max(QUINTIC_PEAK * dq / (speed_fraction * vmax),
                                               initial=0.0)))
    t = np.linspace(0.0, duration, max(11, int(np.ceil(duration / STEP_S)) + 1))
    return MultiArmPlan({a: ArmTrajectory(config.arm(a).joint_names, t,
                                          *rest_to_rest(np.asarray(starts[a], dtype=float),
                                                        np.asarray(q1, dtype=float), t))
                         for a, q1 in targets.items()})
