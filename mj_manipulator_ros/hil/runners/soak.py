"""Stage 8: the full-speed stage, many times."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from mj_manipulator_ros.hil.check_result import CheckResult, check, worst
from mj_manipulator_ros.hil.stages import Protocol, Stage

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def soak(session: "HilSession", stage: Stage, protocol: Protocol,
         runners: Mapping[str, Callable[..., list[CheckResult]]]) -> list[CheckResult]:
    """The stage named by ``checks_of`` (full speed), ``runs`` times, with its runner from
    ``runners`` (the registry, given when registered: it holds this runner too)."""
    runs = int(stage.params["runs"])
    repeated = protocol.by_id(stage.params["checks_of"])
    passed, skews, tracks, detail = 0, [], [], ""
    for run in range(runs):
        results = runners[repeated.runner_name](session, repeated, protocol)
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
