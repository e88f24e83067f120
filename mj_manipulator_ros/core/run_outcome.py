"""An execution's outcome from its arms' reports: the overall status, the report of an
execution stopped before anything was sent, and each stopped arm's stop as measured on its
joint states. Plain values: no ROS."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import (
    ArmReport, ArmStatus, ExecutionReport, ExecutionStatus, StopKind, StopRecord)
from mj_manipulator_ros.core.stop_meter import StopMeter
from mj_manipulator_ros.core.sync import Failure, FailureReason


def overall_status(reports: Mapping[str, ArmReport], failure: Optional[Failure]) -> ExecutionStatus:
    """The execution's status: failed when any arm's stop is unconfirmed; with no failure,
    succeeded when every arm succeeded, stopped when each succeeded or stopped; canceled when
    the first failure was an abort from outside; failed otherwise."""
    if any(not r.stop_confirmed for r in reports.values()):
        return ExecutionStatus.FAILED
    if failure is None:
        if all(r.status is ArmStatus.SUCCEEDED for r in reports.values()):
            return ExecutionStatus.SUCCEEDED
        if all(r.status in (ArmStatus.SUCCEEDED, ArmStatus.STOPPED) for r in reports.values()):
            return ExecutionStatus.STOPPED
        return ExecutionStatus.FAILED
    if failure.reason is FailureReason.EXTERNAL_ABORT:
        return ExecutionStatus.CANCELED
    return ExecutionStatus.FAILED


def not_sent_report(plan: MultiArmPlan, failure: Optional[Failure],
                    not_checked: tuple[str, ...]) -> ExecutionReport:
    """The report of an execution stopped before any goal was sent."""
    reports = {a: ArmReport(ArmStatus.NOT_SENT, None, "stopped before any goal was sent")
               for a in plan.arm_names}
    return ExecutionReport(overall_status(reports, failure), None, failure, reports,
                           not_checked=not_checked)


def stop_requests(reports: Mapping[str, ArmReport],
                  stops: Sequence[StopRecord]) -> dict[str, float]:
    """Each stopped arm's stop request time (controllers' clock, s): the controlled stop's
    request, its cancel request, or (an arm whose controller aborted its goal and holds it) its
    result."""
    controlled = next((r for r in reversed(stops) if r.kind is GoalKind.STOP), None)
    out = {}
    for arm, r in reports.items():
        at = (controlled.requested_at if r.stop is StopKind.CONTROLLED and controlled is not None
              else r.cancel_requested_at if r.stop is StopKind.CANCEL
              else r.result_at if r.status is ArmStatus.ABORTED else None)
        if at is not None:
            out[arm] = at
    return out


def with_stop_figures(reports: Mapping[str, ArmReport], meter: StopMeter,
                      stops: Sequence[StopRecord],
                      stream_failed: Mapping[str, str]) -> dict[str, ArmReport]:
    """Each stopped arm's report with its stop measured on its joint states
    (:func:`stop_requests`); an arm whose joint-state stream was the failure
    (``stream_failed``: arm -> why) gets no figures, and why."""
    requests = stop_requests(reports, stops)
    out = {}
    for arm, r in reports.items():
        if arm in requests and arm in stream_failed:
            out[arm] = dataclasses.replace(r, stop_not_measured=stream_failed[arm])
            continue
        f = meter.figures(arm, requests.get(arm))
        out[arm] = r if f is None else dataclasses.replace(
            r, stop_travel=f.travel, stop_time_s=f.time_s, stop_observed_s=f.observed_s)
    return out
