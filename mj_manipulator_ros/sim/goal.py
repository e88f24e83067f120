"""Goals of the simulated controller in ROS-free form, and their checks (joint_trajectory_controller
rows). The ROS layer converts a FollowJointTrajectory goal into :class:`GoalRequest` and calls
:func:`check_goal`; a non-None answer means: reject (no result, no motion), logged with the reason.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.validation import FINAL_VELOCITY_EPS

#: error codes of control_msgs/FollowJointTrajectory.Result (no ROS import here)
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP = 0, -1, -2, -3
PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = -4, -5
PREEMPTED_MESSAGE = "Current goal preempted by new incoming action."


@dataclass(frozen=True)
class ToleranceRequest:
    """One JointTolerance as sent (0 = use the default, -1 = unchecked)."""

    name: str
    position: float = 0.0
    velocity: float = 0.0


@dataclass(frozen=True)
class GoalRequest:
    """A FollowJointTrajectory goal, unpacked. Rows are per point; times in s."""

    joint_names: tuple[str, ...]
    times: Sequence[float]
    positions: Sequence[Sequence[float]]
    velocities: Sequence[Sequence[float]]
    accelerations: Sequence[Sequence[float]]
    stamp_s: float                     # header.stamp, s; 0 = start at the next control cycle
    path_tolerance: tuple[ToleranceRequest, ...] = ()
    goal_tolerance: tuple[ToleranceRequest, ...] = ()
    goal_time_tolerance: float = 0.0   # 0 = default, negative = unchecked


@dataclass(frozen=True)
class Tolerances:
    """Effective per-joint tolerances, shape (J,); inf = unchecked."""

    path_position: np.ndarray
    path_velocity: np.ndarray
    goal_position: np.ndarray
    goal_velocity: np.ndarray
    goal_time: float


@dataclass(frozen=True)
class ControllerGoal:
    """A checked goal in the arm's joint order."""

    trajectory: ArmTrajectory
    start_time: Optional[float]   # controller clock, s; None = next control cycle
    tolerances: Tolerances


@dataclass
class GoalTicket:
    """Shared between the action thread (waits, reads) and the physics thread (updates).

    The physics thread sets ``outcome`` once and then ``done``; the feedback fields are replaced
    whole under ``lock``.
    """

    goal: ControllerGoal
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cancel_requested: bool = False
    outcome: Optional[str] = None      # "succeeded" | "aborted" | "canceled"
    error_code: int = SUCCESSFUL
    error_string: str = ""
    # feedback snapshot (controller clock, arrays (J,))
    time: float = 0.0
    index: int = 0
    desired: Optional[np.ndarray] = None
    desired_velocity: Optional[np.ndarray] = None
    actual: Optional[np.ndarray] = None
    actual_velocity: Optional[np.ndarray] = None
    # statistics
    started_at: Optional[float] = None
    motion_onset: Optional[float] = None
    max_tracking_error: float = 0.0
    final_error: Optional[float] = None


def _effective(requests: Sequence[ToleranceRequest], joints: Sequence[str], attr: str,
               default: float) -> np.ndarray:
    """Per joint: request > 0 -> it; 0 or absent -> default (0 default = unchecked); < 0 -> unchecked."""
    out = np.full(len(joints), default if default > 0 else np.inf)
    for r in requests:
        if r.name in joints:
            v = getattr(r, attr)
            k = joints.index(r.name)
            out[k] = v if v > 0 else (np.inf if v < 0 else out[k])
    return out


def check_goal(req: GoalRequest, arm_joints: Sequence[str], now: float, defaults,
               allow_partial: bool = False, allow_nonzero_end_velocity: bool = False,
               hold_positions: Optional[np.ndarray] = None) -> tuple[Optional[str], Optional[ControllerGoal]]:
    """Check a goal like joint_trajectory_controller. Returns (reason, None) to reject, or
    (None, goal) to accept.

    Args:
        req: the goal.
        arm_joints: the controller's joints, in its order.
        now: controller clock, s.
        defaults: a ToleranceDefaults (sim_config).
        hold_positions: current positions (J,), used for joints a partial goal leaves out.
    """
    arm_joints = list(arm_joints)
    names = list(req.joint_names)
    dup = sorted({j for j in names if names.count(j) > 1})
    if dup:
        return f"duplicate joint(s) {dup} in the goal", None
    unknown = [j for j in names if j not in arm_joints]
    if unknown:
        return f"unknown joint(s) {unknown}; this controller has {arm_joints}", None
    missing = [j for j in arm_joints if j not in names]
    if missing and not allow_partial:
        return f"goal is missing joint(s) {missing} (partial goals are not allowed)", None
    n = len(req.times)
    if n == 0:
        return "the trajectory has no points", None
    times = np.asarray(req.times, dtype=float)
    if times[0] < 0 or np.any(np.diff(times) <= 0):
        bad = 0 if times[0] < 0 else int(np.flatnonzero(np.diff(times) <= 0)[0]) + 1
        return f"time_from_start of point {bad} ({times[bad]} s) is not strictly increasing", None
    for what, rows, required in (("positions", req.positions, True),
                                 ("velocities", req.velocities, False),
                                 ("accelerations", req.accelerations, False)):
        sizes = [len(r) for r in rows]
        if not required and all(s == 0 for s in sizes):
            continue
        for i, s in enumerate(sizes):
            if s != len(names):
                return f"point {i}: {what} has {s} values, expected {len(names)}", None
    pos = np.asarray(req.positions, dtype=float)
    vel = np.asarray(req.velocities, dtype=float) if any(len(r) for r in req.velocities) else None
    acc = np.asarray(req.accelerations, dtype=float) if any(len(r) for r in req.accelerations) else None
    for what, a in (("positions", pos), ("velocities", vel), ("accelerations", acc)):
        if a is not None and not np.all(np.isfinite(a)):
            return f"{what} contain non-finite values", None
    if vel is not None and not allow_nonzero_end_velocity:
        moving = np.flatnonzero(np.abs(vel[-1]) > FINAL_VELOCITY_EPS)
        if moving.size:
            j = int(moving[0])
            return (f"final velocity of {names[j]} is {vel[-1, j]}; the trajectory must end at "
                    "rest", None)
    if req.stamp_s > 0 and req.stamp_s + times[-1] < now:
        return (f"trajectory ends in the past (stamp {req.stamp_s:.3f} s + {times[-1]:.3f} s < "
                f"now {now:.3f} s)", None)

    order = [names.index(j) if j in names else -1 for j in arm_joints]

    def reorder(a):
        if a is None:
            return None
        out = np.zeros((n, len(arm_joints)))
        for k, src in enumerate(order):
            out[:, k] = a[:, src] if src >= 0 else (hold_positions[k] if a is pos else 0.0)
        return out
    traj = ArmTrajectory(tuple(arm_joints), times, reorder(pos), reorder(vel), reorder(acc))
    gtt = req.goal_time_tolerance
    goal_time = (math.inf if gtt < 0 else gtt) if gtt != 0 else (
        defaults.goal_time if defaults.goal_time > 0 else math.inf)
    tol = Tolerances(
        _effective(req.path_tolerance, arm_joints, "position", defaults.path_position),
        _effective(req.path_tolerance, arm_joints, "velocity", defaults.path_velocity),
        _effective(req.goal_tolerance, arm_joints, "position", defaults.goal_position),
        _effective(req.goal_tolerance, arm_joints, "velocity", defaults.goal_velocity),
        goal_time)
    return None, ControllerGoal(traj, req.stamp_s if req.stamp_s > 0 else None, tol)
