"""Goals of the simulated controller in ROS-free form, and their checks (joint_trajectory_controller
rows). The ROS layer converts a FollowJointTrajectory goal into :class:`GoalRequest` and calls
:func:`check_goal`; a non-None answer means: reject (no result, no motion), logged with the reason.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.phase_table import WordEnum
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.tolerances import (
    GoalTolerances, JointTolerance, ToleranceDefaults, Tolerances, effective)
from mj_manipulator_ros.core.validation import FINAL_VELOCITY_EPS

#: error codes of control_msgs/FollowJointTrajectory.Result (no ROS import here)
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP = 0, -1, -2, -3
PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = -4, -5
PREEMPTED_MESSAGE = "Current goal preempted by new incoming action."


@dataclass(frozen=True)
class GoalRequest:
    """A FollowJointTrajectory goal, unpacked. Rows are per point; times in s."""

    joint_names: tuple[str, ...]
    times: Sequence[float]
    positions: Sequence[Sequence[float]]
    velocities: Sequence[Sequence[float]]
    accelerations: Sequence[Sequence[float]]
    stamp_s: float                     # header.stamp, s; 0 = start at the next control cycle
    path_tolerance: tuple[JointTolerance, ...] = ()
    goal_tolerance: tuple[JointTolerance, ...] = ()
    goal_time_tolerance: float = 0.0   # 0 = default, -1 = unchecked, other negative = illegal
    efforts: Sequence[Sequence[float]] = ()  # per point; joint_trajectory_controller rejects any

    @property
    def tolerances(self) -> GoalTolerances:
        """The tolerances the goal asks for (core.tolerances)."""
        return GoalTolerances(tuple(self.path_tolerance), tuple(self.goal_tolerance),
                              self.goal_time_tolerance)


@dataclass(frozen=True)
class ControllerGoal:
    """A checked goal in the arm's joint order."""

    trajectory: ArmTrajectory
    start_time: Optional[float]   # controller clock, s; None = next control cycle
    tolerances: Tolerances
    tolerance_warning: str = ""   # why the goal's tolerances were reverted to the defaults


@dataclass(frozen=True)
class Feedback:
    """One control cycle's feedback of a goal (controller clock; arrays (J,))."""

    time: float
    index: int                        # as JTC: the segment's end point (0 before the first point)
    desired: np.ndarray
    desired_velocity: np.ndarray
    desired_acceleration: np.ndarray
    actual: np.ndarray
    actual_velocity: np.ndarray


class GoalOutcome(WordEnum):
    """How a simulated controller's goal ended (the action's terminal state)."""

    SUCCEEDED = "succeeded"
    ABORTED = "aborted"
    CANCELED = "canceled"


@dataclass
class GoalTicket:
    """Shared between the action thread (waits, reads) and the physics thread (updates).

    The physics thread sets ``outcome`` once and then ``done``. Each control cycle's feedback is
    written into :attr:`feedback` in one operation (by the follower, or by the compiled
    follower with the GIL held), so :meth:`latest` (one copy) reads one cycle's values.
    """

    goal: ControllerGoal
    done: threading.Event = field(default_factory=threading.Event)
    #: set by the action server once it has returned the result (the simulator's own abort
    #: waits for it, bounded, before physics steps on: the result is said first)
    result_sent: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cancel_requested: bool = False
    outcome: Optional[GoalOutcome] = None   # None until the goal ends
    error_code: int = SUCCESSFUL
    error_string: str = ""
    #: ``[desired | desired velocity | desired acceleration | actual | actual velocity | time |
    #: index | max tracking error]``, shape (5J + 3,); time NaN until the first cycle
    feedback: np.ndarray = field(init=False, repr=False)
    # statistics
    started_at: Optional[float] = None
    picked_up_at: Optional[float] = None  # the control cycle that took it (controller clock)
    motion_onset: Optional[float] = None
    final_error: Optional[float] = None

    def __post_init__(self) -> None:
        self.feedback = np.zeros(5 * len(self.goal.trajectory.joint_names) + 3)
        self.feedback[-3] = np.nan

    def latest(self) -> Optional[Feedback]:
        """The last control cycle's feedback (a copy), None before the first."""
        fb = self.feedback.copy()   # one operation: one cycle's values
        if np.isnan(fb[-3]):
            return None
        j = (fb.size - 3) // 5
        rows = fb[:5 * j].reshape(5, j)
        return Feedback(float(fb[-3]), int(fb[-2]), *rows)

    @property
    def max_tracking_error(self) -> float:
        """The largest |actual - desired| of any joint over the cycles so far (rad)."""
        return float(self.feedback[-1])

    @property
    def actual(self) -> Optional[np.ndarray]:
        """The last cycle's measured positions (J,), None before the first."""
        latest = self.latest()
        return None if latest is None else latest.actual

    @property
    def desired(self) -> Optional[np.ndarray]:
        """The last cycle's reference positions (J,), None before the first."""
        latest = self.latest()
        return None if latest is None else latest.desired

    @property
    def time(self) -> float:
        """The last cycle's time (controller clock, s); 0 before the first."""
        t = float(self.feedback[-3])
        return 0.0 if t != t else t


def check_goal(req: GoalRequest, arm_joints: Sequence[str], now: Optional[float],
               defaults: ToleranceDefaults,
               allow_partial: bool = False, allow_nonzero_end_velocity: bool = False,
               hold_positions: Optional[np.ndarray] = None) -> tuple[Optional[str], Optional[ControllerGoal]]:
    """Check a goal like joint_trajectory_controller. Returns (reason, None) to reject, or
    (None, goal) to accept.

    Args:
        req: the goal.
        arm_joints: the controller's joints, in its order.
        now: controller clock, s; None skips the "ends in the past" check (JTC makes it when
            the goal arrives, never again when the accepted goal starts executing).
        defaults: the controller's tolerance defaults.
        hold_positions: current positions (J,), used for joints a partial goal leaves out.
    """
    arm_joints = list(arm_joints)
    names = list(req.joint_names)
    if not names:
        return "empty joint names on the incoming trajectory", None
    dup = sorted({j for j in names if names.count(j) > 1})
    if dup:  # deliberate difference (docs/simulator.md): JTC does not check duplicates
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
    if np.any(np.diff(times) <= 0):  # as JTC: the first time may be negative
        bad = int(np.flatnonzero(np.diff(times) <= 0)[0]) + 1
        return f"time_from_start of point {bad} ({times[bad]} s) is not strictly increasing", None
    if any(len(e) for e in req.efforts):
        return "trajectories with effort fields are not supported", None
    for what, rows, required in (("positions", req.positions, True),
                                 ("velocities", req.velocities, False),
                                 ("accelerations", req.accelerations, False)):
        sizes = [len(r) for r in rows]
        if not required and all(s == 0 for s in sizes):
            continue
        if not required and any(s == 0 for s in sizes):
            # deliberate difference (docs/simulator.md): JTC takes them point by point
            without = [i for i, s in enumerate(sizes) if s == 0]
            return (f"{what} on only some points (none at points {without[:5]}); this simulator "
                    "interpolates one kind of spline per trajectory"), None
        for i, s in enumerate(sizes):
            if s != len(names):
                return f"point {i}: {what} has {s} values, expected {len(names)}", None
    pos = np.asarray(req.positions, dtype=float)
    vel = np.asarray(req.velocities, dtype=float) if any(len(r) for r in req.velocities) else None
    acc = np.asarray(req.accelerations, dtype=float) if any(len(r) for r in req.accelerations) else None
    for what, a in (("positions", pos), ("velocities", vel), ("accelerations", acc)):
        if a is not None and not np.all(np.isfinite(a)):  # deliberate difference: JTC takes them
            return f"{what} contain non-finite values", None
    if vel is not None and not allow_nonzero_end_velocity:
        moving = np.flatnonzero(np.abs(vel[-1]) > FINAL_VELOCITY_EPS)
        if moving.size:
            j = int(moving[0])
            return (f"final velocity of {names[j]} is {vel[-1, j]}; the trajectory must end at "
                    "rest", None)
    if now is not None and req.stamp_s > 0 and req.stamp_s + times[-1] < now:
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
    tol, warning = effective(req.tolerances, arm_joints, defaults)
    return None, ControllerGoal(traj, req.stamp_s if req.stamp_s > 0 else None, tol, warning)
