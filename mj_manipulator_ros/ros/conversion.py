"""Conversion between core values and ROS messages (trajectory_msgs, builtin_interfaces)."""

from __future__ import annotations

import array
from typing import Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from control_msgs.msg import JointTolerance as JointToleranceMsg
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import JointMismatchError, PlanError
from mj_manipulator_ros.core.object_cache import kept
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.sync import StartStamp
from mj_manipulator_ros.core.tolerances import GoalTolerances, JointTolerance, split


def duration_msg(seconds: float) -> Duration:
    ns = int(round(seconds * 1e9))
    sec, nanosec = divmod(ns, 1_000_000_000)
    return Duration(sec=sec, nanosec=nanosec)


def duration_s(msg: Duration) -> float:
    return msg.sec + msg.nanosec * 1e-9


def time_msg(stamp: StartStamp) -> Time:
    sec, nanosec = stamp.sec_nanosec
    return Time(sec=sec, nanosec=nanosec)


def stamp_msg(seconds: float) -> Time:
    """A Time message of ``seconds`` (rounded to the nanosecond)."""
    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def time_ns(msg: Time) -> int:
    return msg.sec * 1_000_000_000 + msg.nanosec


def trajectory_msg(traj: ArmTrajectory, stamp: StartStamp | None = None,
                   names: Mapping[str, str] | None = None, shared: bool = False
                   ) -> JointTrajectory:
    """A JointTrajectory for one arm; ``header.stamp`` = stamp (0 when None); ``names``: model
    name -> the name its controller uses (``ArmConfig.to_wire``; None: the plan's names).
    ``shared``: its points are :func:`trajectory_points`' (made once per trajectory, shared by
    every message that asks: read them, never change them); else points of its own."""
    msg = JointTrajectory()
    msg.joint_names = [names.get(j, j) for j in traj.joint_names] if names \
        else list(traj.joint_names)
    if stamp is not None:
        msg.header.stamp = time_msg(stamp)
    msg.points = list(trajectory_points(traj)) if shared else _points(traj)
    return msg


def trajectory_points(traj: ArmTrajectory) -> list[JointTrajectoryPoint]:
    """The points of ``traj``'s message, made once per trajectory (its arrays are read-only)
    and kept while it lives: a plan's goal is built before it is needed (a 1,401-point arm is
    about 10 ms of Python objects) and again by nobody. Shared: never change them."""
    return kept(_points_of, traj, _points)


#: id of a trajectory -> its message's points, while the trajectory lives
_points_of: dict[int, list] = {}


def _points(traj: ArmTrajectory) -> list[JointTrajectoryPoint]:
    out = []
    fields = [(name, values) for name, values in (
        ("positions", traj.positions), ("velocities", traj.velocities),
        ("accelerations", traj.accelerations)) if values is not None]
    for i in range(traj.times.size):
        p = JointTrajectoryPoint()
        for name, values in fields:   # rclpy keeps an array.array('d') as given
            row = array.array("d")
            row.frombytes(values[i].tobytes())
            setattr(p, name, row)
        p.time_from_start = duration_msg(float(traj.times[i]))
        out.append(p)
    return out


def trajectory_from_msg(msg: JointTrajectory, arm: str = "") -> ArmTrajectory:
    """An ArmTrajectory from a JointTrajectory (header ignored). Sizes are checked per point."""
    points = msg.points
    times = [duration_s(p.time_from_start) for p in points]
    positions = _rows([p.positions for p in points])
    velocities = _rows([p.velocities for p in points])
    accelerations = _rows([p.accelerations for p in points])
    return ArmTrajectory(tuple(msg.joint_names), np.asarray(times, dtype=float),
                         [[] for _ in points] if positions is None else positions,
                         velocities, accelerations,
                         arm=arm)


def _rows(values: list) -> np.ndarray | list | None:
    """One field of every point: None when every point leaves it empty, else
    :func:`point_rows`."""
    return None if all(len(v) == 0 for v in values) else point_rows(values)


def point_rows(values: list) -> np.ndarray | list:
    """One field of every point (``[p.positions for p in points]``, say): (N, J) floats when
    every point has J of them as rclpy gives them (``array.array('d')``: read as one buffer,
    J may be 0); else the rows as lists (the reader reports the first row whose size is
    wrong)."""
    sizes = {len(v) for v in values}
    if len(sizes) == 1 and all(isinstance(v, array.array) and v.typecode == "d" for v in values):
        return np.frombuffer(b"".join(v.tobytes() for v in values), dtype=float
                             ).reshape(len(values), sizes.pop())
    return [list(v) for v in values]


def split_combined(msg: JointTrajectory, config: ExecutorConfig) -> MultiArmPlan:
    """Split a trajectory over the joints of several arms into one trajectory per arm.

    Arms none of whose joints appear are left out; an arm only partly covered, or a joint of no
    arm, is an error (nothing is executed).

    Raises:
        JointMismatchError: a joint belongs to no arm, or an arm is only partly covered.
        PlanError: no joint of any arm appears.
    """
    names = list(msg.joint_names)
    owner = {j: a.name for a in config.arms for j in a.joint_names}
    stray = [j for j in names if j not in owner]
    if stray:
        raise JointMismatchError(
            f"joint(s) {stray} belong to no configured arm; known joints: {sorted(owner)}",
            joint=stray[0])
    full = trajectory_from_msg(msg, arm="combined")
    arms = {}
    for arm in config.arms:
        cols = [names.index(j) for j in arm.joint_names if j in names]
        if not cols:
            continue
        if len(cols) != len(arm.joint_names):
            missing = [j for j in arm.joint_names if j not in names]
            raise JointMismatchError(f"the goal names only some of the arm's joints; missing "
                                     f"{missing}", arm=arm.name, joint=missing[0])
        arms[arm.name] = ArmTrajectory(
            arm.joint_names, full.times, full.positions[:, cols],
            None if full.velocities is None else full.velocities[:, cols],
            None if full.accelerations is None else full.accelerations[:, cols], arm=arm.name)
    if not arms:
        raise PlanError(f"the goal names no joint of any arm; arms: {list(config.arm_names)}")
    return MultiArmPlan(arms)


def joint_order(plan: MultiArmPlan) -> Sequence[str]:
    return [j for t in plan.arms.values() for j in t.joint_names]


def goal_tolerances(goal) -> GoalTolerances:
    """The tolerances a FollowJointTrajectory goal (or a combined goal) asks for, as values."""
    def values(messages) -> tuple[JointTolerance, ...]:
        return tuple(JointTolerance(t.name, t.position, t.velocity, t.acceleration)
                     for t in messages)
    return GoalTolerances(values(goal.path_tolerance), values(goal.goal_tolerance),
                          duration_s(goal.goal_time_tolerance))


def fill_tolerances(goal, tolerances: GoalTolerances,
                    names: Mapping[str, str] | None = None) -> None:
    """Set the tolerance fields of a FollowJointTrajectory.Goal; ``names``: model name -> the
    name the arm's controller uses (None: as given)."""
    wire = tolerances.renamed(names)
    goal.path_tolerance = [_tolerance_msg(t) for t in wire.path]
    goal.goal_tolerance = [_tolerance_msg(t) for t in wire.goal]
    goal.goal_time_tolerance = duration_msg(wire.goal_time)


def split_tolerances(goal, config: ExecutorConfig, arms: Sequence[str]) -> dict[str, GoalTolerances]:
    """A combined goal's path/goal tolerances split by the arm that owns each joint; every arm
    gets the goal time tolerance (``core.tolerances.split``).

    Raises:
        JointMismatchError: a tolerance names a joint of no arm in ``arms``.
    """
    owner = {j: a.name for a in config.arms if a.name in arms for j in a.joint_names}
    return split(goal_tolerances(goal), owner, arms)


def _tolerance_msg(t: JointTolerance) -> JointToleranceMsg:
    return JointToleranceMsg(name=t.name, position=float(t.position), velocity=float(t.velocity),
                             acceleration=float(t.acceleration))
