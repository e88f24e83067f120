"""The motions the bring-up stages make, built from the arms' measured poses.

Every motion is rest to rest and within the configured limits; motions that bring an arm to a
plan's start are replay-checked against the other arms' measured poses before they run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.check.timeline import Timeline, build_timeline
from mj_manipulator_ros.core.interpolation import rest_to_rest
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.report import ExecutionReport

if TYPE_CHECKING:  # the session imports rclpy; motions only call it
    from mj_manipulator_ros.hil.session import HilSession

#: waypoints of the generated out-and-back and one-way motions
WAYPOINTS = 41


def toward_middle(session: "HilSession", arm: str) -> tuple[np.ndarray, np.ndarray]:
    """The arm's measured pose (J,) and, per joint, +-1 toward the middle of its range."""
    q0 = session.pose(arm)
    lo, hi = session.limits(arm)
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, q0 + 1.0)
    return q0, np.where(mid >= q0, 1.0, -1.0)


def out_and_back(session: "HilSession", arm: str, amplitude: float, duration: float) -> MultiArmPlan:
    """Every joint out by ``amplitude`` rad (toward the middle of its range) and back, in
    ``duration`` s, zero speed at both ends."""
    q0, direction = toward_middle(session, arm)
    t = np.linspace(0.0, duration, WAYPOINTS)
    s = np.sin(np.pi * t / duration) ** 2           # 0 -> 1 -> 0
    ds = (np.pi / duration) * np.sin(2 * np.pi * t / duration)
    ds[-1] = 0.0
    q = q0 + np.outer(s, direction * amplitude)
    v = np.outer(ds, direction * amplitude)
    return MultiArmPlan({arm: ArmTrajectory(session.config.arm(arm).joint_names, t, q, v)})


def one_way(session: "HilSession", arm: str, amplitude: float, duration: float) -> MultiArmPlan:
    """Every joint by ``amplitude`` rad toward the middle of its range, rest to rest."""
    q0, direction = toward_middle(session, arm)
    t = np.linspace(0.0, duration, WAYPOINTS)
    q, v = rest_to_rest(q0, q0 + direction * amplitude, t)
    return MultiArmPlan({arm: ArmTrajectory(session.config.arm(arm).joint_names, t, q, v)})


def return_to(session: "HilSession", poses: Mapping[str, np.ndarray]) -> ExecutionReport:
    """Move the named arms slowly back to ``poses`` (J,) each."""
    report, _ = session.run(session.move_plan(dict(poses)), settle=0.1)
    return report


def with_holds(session: "HilSession", plan: MultiArmPlan) -> Timeline:
    """A timeline of ``plan`` with every other configured arm holding its measured pose."""
    return build_timeline(plan, "synchronized").with_holds(
        {a: session.pose(a) for a in session.config.arm_names if a not in plan.arms})


def approach(session: "HilSession", plan: MultiArmPlan, arms: Sequence[str]) -> Optional[str]:
    """Move ``arms`` slowly to the plan's first pose (replay-checked first, with the other arms
    holding). Returns an error text, or None."""
    move = session.move_plan({a: plan[a].positions[0] for a in arms})
    if "scene" in session.config.extra:
        report = session.checker.check(timeline=with_holds(session, move), mode="recorded")
        if not report.collision_free:
            return f"moving to the plan's start pose would collide: {report.summary().splitlines()[0]}"
    report, _ = session.run(move, settle=0.2)
    if not report.succeeded:
        return f"could not move to the plan's start pose: {report.summary()}"
    return None
