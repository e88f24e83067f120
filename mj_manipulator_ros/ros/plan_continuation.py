"""Continuing a plan after a stop, without restarting anything (``core/continuation.py``):
the executor's :meth:`~mj_manipulator_ros.ros.executor.MultiArmExecutor.continue_plan`.

Three executions, each validated, gated by the pre-flight check and start-checked (start state
and controller clocks) as any plan, each run only if the one before succeeded:

1. **approach** (only with ``approach=True`` and an arm off its plan): every arm off its plan
   to its plan's nearest configuration, rest to rest (``core/approach.approach_plan``), the
   others standing still;
2. **retrace**: every arm ahead of the earliest arm's plan time back along its own path to it;
3. **rest**: the plan from that plan time, from rest (a ramp to the plan's speed, then its own
   waypoints).

An arm off its plan without ``approach`` is refused by name (:class:`OffPlanError`) before
anything moves.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from mj_manipulator_ros.core.approach import approach_plan, approach_tolerances
from mj_manipulator_ros.core.continuation import (
    ContinuationReport, OffPlanError, common_time, locate, remainder, report_hints, retrace)
from mj_manipulator_ros.core.errors import StartStateError
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.time_scaling import config_bounds
from mj_manipulator_ros.core.validation import validate_plan


def find(executor, plan: MultiArmPlan, hints: Mapping[str, float]
         ) -> tuple[dict[str, float], dict[str, OffPlanError]]:
    """Where each arm of ``plan`` stands on it (plan time, s), from its measured position;
    the arms off their plan with their errors (their nearest plan time in ``found``).

    Raises:
        StartStateError: no fresh joint state of an arm, or an arm whose every joint's start
            tolerance is 0 (unchecked): where it stands on its plan cannot be told.
    """
    measured = executor.start_check.measured(list(plan.arm_names))
    found, off = {}, {}
    for arm in plan.arm_names:
        tol = executor.start_check.tolerances(arm)
        if not np.any(tol > 0):
            raise StartStateError(
                "every joint's start tolerance is 0 (unchecked): continuing needs one to tell "
                "where the arm stands on its plan (execution.start_tolerance_rad, or "
                "arms[].start_tolerance)", arm=arm)
        traj = plan[arm]
        cfg = executor.config.arm(arm)
        order = [cfg.joint_names.index(j) for j in traj.joint_names]
        q = measured[arm][order]
        tol = np.where(tol > 0, tol, np.inf)[order]
        try:
            found[arm] = locate(traj, q, tol, hints.get(arm))
        except OffPlanError as exc:
            found[arm], off[arm] = exc.plan_time, exc
    return found, off


def continue_plan(executor, plan: MultiArmPlan, approach: bool = False,
                  hints: Optional[Mapping[str, float]] = None) -> ContinuationReport:
    """See the module docstring. ``hints``: arm -> plan time the arm is expected near (default
    from the executor's latest report when it ran this plan).

    Raises:
        PlanError: the plan is invalid; OffPlanError (a StartStateError): an arm stands off its
            plan and ``approach`` is False (nothing moved); StartStateError: where an arm
            stands cannot be told.
        ExecutionRefusedError: the pre-flight check refused a part (nothing of it was sent).
    """
    validate_plan(plan, executor.config)
    if hints is None:
        hints = {}
        last = executor.last_report
        if last is not None and executor.last_run is not None and \
                set(executor.last_run.plan.arm_names) == set(plan.arm_names) and \
                abs(executor.last_run.plan.duration - plan.duration) < 1e-6:
            hints = report_hints(last, plan)
    found, off = find(executor, plan, hints)
    if off and not approach:
        first = next(iter(off.values()))
        others = [a for a in off if a != first.arm]
        also = f" (also off their plans: {others})" if others else ""
        raise OffPlanError(f"{first.detail}{also}; nothing was sent", plan_time=first.plan_time,
                           arm=first.arm, joint=first.joint, value=first.value)
    result = {"found": dict(found), "off_plan": tuple(off), "common_time": common_time(found)}
    if off:
        measured = executor.start_check.measured(list(off))
        targets = {a: _reordered(executor, plan, a, sample(plan[a], [found[a]])[0][0])
                   for a in off}
        # each move ends where the next one's start check passes, or fails by name
        moved = executor.execute(approach_plan(executor.config, measured, targets),
                                 tolerances=approach_tolerances(executor.config, targets))
        result["approach"] = moved
        if not moved.succeeded:
            return ContinuationReport(**result)
    bounds = config_bounds(plan, executor.config)
    back = retrace(plan, found, result["common_time"], bounds)
    if back is not None:
        report = executor.execute(back, tolerances=approach_tolerances(executor.config,
                                                                       back.arm_names))
        result["retrace"] = report
        if not report.succeeded:
            return ContinuationReport(**result)
    result["rest"] = executor.execute(remainder(plan, result["common_time"], bounds))
    return ContinuationReport(**result)


def _reordered(executor, plan: MultiArmPlan, arm: str, q: np.ndarray) -> np.ndarray:
    """``q`` in the plan's joint order as the configuration orders the arm's joints."""
    names = list(plan[arm].joint_names)
    return np.asarray([q[names.index(j)] for j in executor.config.arm(arm).joint_names])
