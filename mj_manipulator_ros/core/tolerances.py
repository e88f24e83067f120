"""Tolerances, in one place: what a FollowJointTrajectory goal asks for (per joint, as
control_msgs/JointTolerance), the defaults a controller falls back on, the effective per-joint
tolerances a controller enforces (joint_trajectory_controller's rules), an arm's share of a
combined goal's tolerances, and the executor's own per-joint rows (start and path tolerance).

Used by the simulated controllers (``sim/goal.py``), the conversion of a combined goal
(``ros/conversion.py``), the start check and the execution watch. Plain values: no ROS, no
MuJoCo.

joint_trajectory_controller's rule for one value (``tolerances.hpp``): > 0 is the tolerance;
0 means the controller's default (a default of 0 means unchecked); -1 (``ERASE``) means
unchecked; any other negative value is illegal, and then the controller reverts *every*
tolerance of the goal to its defaults (it does not reject the goal). A tolerance for a joint
the controller does not have reverts them all too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.errors import JointMismatchError

#: the one negative tolerance value that means "unchecked" (JTC's ERASE_VALUE)
ERASE = -1.0


@dataclass(frozen=True)
class JointTolerance:
    """One control_msgs/JointTolerance as sent: position (rad or m), velocity (per s),
    acceleration (per s^2); each > 0 a tolerance, 0 the default, -1 unchecked."""

    name: str
    position: float = 0.0
    velocity: float = 0.0
    acceleration: float = 0.0

    def renamed(self, names: Optional[Mapping[str, str]]) -> "JointTolerance":
        """The same tolerance under ``names[name]`` (the controller's name for the joint)."""
        if not names or names.get(self.name, self.name) == self.name:
            return self
        return JointTolerance(names[self.name], self.position, self.velocity, self.acceleration)


@dataclass(frozen=True)
class ToleranceDefaults:
    """A controller's defaults, used where a goal's tolerance is 0. A default of 0 means
    unchecked (as JTC)."""

    path_position: float = field(default=0.0, metadata={"doc": "rad/m; 0 = unchecked", "min": 0.0})
    path_velocity: float = field(default=0.0, metadata={"doc": "per s; 0 = unchecked", "min": 0.0})
    goal_position: float = field(default=0.05, metadata={"doc": "rad/m; 0 = unchecked", "min": 0.0})
    goal_velocity: float = field(default=0.01, metadata={
        "doc": "per s; 0 = unchecked (JTC's stopped_velocity_tolerance, default 0.01)", "min": 0.0})
    goal_time: float = field(default=1.0, metadata={
        "doc": "s after the end to reach goal tolerance; 0 = wait forever", "min": 0.0})


@dataclass(frozen=True)
class Tolerances:
    """The effective per-joint tolerances a controller enforces, each shape (J,) in the
    controller's joint order; inf = unchecked. ``goal_time``: s after the trajectory's end."""

    path_position: np.ndarray
    path_velocity: np.ndarray
    goal_position: np.ndarray
    goal_velocity: np.ndarray
    goal_time: float


@dataclass(frozen=True)
class GoalTolerances:
    """What one goal asks for: path and goal tolerances per joint, and the goal time tolerance
    (s; 0 the default, -1 unchecked). An arm's share of a combined goal, or a goal as a
    controller received it."""

    path: tuple[JointTolerance, ...] = ()
    goal: tuple[JointTolerance, ...] = ()
    goal_time: float = 0.0

    def renamed(self, names: Optional[Mapping[str, str]]) -> "GoalTolerances":
        """The same tolerances under the controller's joint names (``names``: model name -> the
        controller's; None: as given)."""
        return GoalTolerances(tuple(t.renamed(names) for t in self.path),
                              tuple(t.renamed(names) for t in self.goal), self.goal_time)


def resolve_value(value: float, default: float) -> Optional[float]:
    """JTC's rule for one value: > 0 -> it; -1 -> unchecked (inf); 0 -> the default (a default
    of 0 is unchecked); any other negative -> None (illegal)."""
    if value > 0:
        return value
    if abs(value - ERASE) < 1e-12:
        return math.inf
    if value < 0:
        return None
    return default if default > 0 else math.inf


def effective(asked: GoalTolerances, joints: Sequence[str],
              defaults: ToleranceDefaults) -> tuple[Tolerances, str]:
    """The tolerances a joint_trajectory_controller with ``joints`` and ``defaults`` enforces for
    a goal that asked for ``asked``, and a warning ("" if none) when it reverts them all to the
    defaults (a tolerance for a joint it does not have, or an illegal negative value)."""
    def default_row(value: float) -> np.ndarray:
        return np.full(len(joints), value if value > 0 else math.inf)
    base = Tolerances(default_row(defaults.path_position), default_row(defaults.path_velocity),
                      default_row(defaults.goal_position), default_row(defaults.goal_velocity),
                      defaults.goal_time if defaults.goal_time > 0 else math.inf)
    goal_time = resolve_value(asked.goal_time, defaults.goal_time)
    if goal_time is None:
        return base, f"illegal goal_time_tolerance {asked.goal_time}: using the defaults"
    index = {j: k for k, j in enumerate(joints)}
    rows = {"path_position": base.path_position.copy(), "path_velocity": base.path_velocity.copy(),
            "goal_position": base.goal_position.copy(), "goal_velocity": base.goal_velocity.copy()}
    for kind, requests in (("path", asked.path), ("goal", asked.goal)):
        for r in requests:
            if r.name not in index:
                return base, f"{kind} tolerance for unknown joint {r.name!r}: using the defaults"
            k = index[r.name]
            for attr in ("position", "velocity"):
                value = resolve_value(getattr(r, attr), rows[f"{kind}_{attr}"][k])
                if value is None:
                    return base, (f"illegal {attr} {kind} tolerance {getattr(r, attr)} for joint "
                                  f"{r.name!r}: using the defaults")
                rows[f"{kind}_{attr}"][k] = value
            if resolve_value(r.acceleration, 0.0) is None:
                return base, (f"illegal acceleration {kind} tolerance {r.acceleration} for joint "
                              f"{r.name!r}: using the defaults")
    return Tolerances(rows["path_position"], rows["path_velocity"], rows["goal_position"],
                      rows["goal_velocity"], goal_time), ""


def split(asked: GoalTolerances, owner: Mapping[str, str],
          arms: Sequence[str]) -> dict[str, GoalTolerances]:
    """A combined goal's tolerances split by the arm that owns each joint (``owner``: joint ->
    arm); every arm in ``arms`` gets the goal time tolerance.

    Raises:
        JointMismatchError: a tolerance names a joint no arm owns (joint_trajectory_controller
            would revert that arm's tolerances to its defaults: refused instead).
    """
    out: dict[str, dict[str, list[JointTolerance]]] = {a: {"path": [], "goal": []} for a in arms}
    for kind, tolerances in (("path", asked.path), ("goal", asked.goal)):
        for t in tolerances:
            if t.name not in owner or owner[t.name] not in out:
                raise JointMismatchError(f"{kind}_tolerance names joint {t.name!r}, which no arm "
                                         f"of the goal has; joints: {sorted(owner)}", joint=t.name)
            out[owner[t.name]][kind].append(t)
    return {a: GoalTolerances(tuple(v["path"]), tuple(v["goal"]), asked.goal_time)
            for a, v in out.items()}


def joint_row(per_joint: Mapping[str, float], default: float, joints: Sequence[str]) -> np.ndarray:
    """The executor's own tolerance per joint (the start or path tolerance), shape (J,) in the
    order of ``joints``: the joint's own setting where the arm has one, else the default
    (rad or m; 0 = unchecked)."""
    return np.array([float(per_joint.get(j, default)) for j in joints], dtype=float)


def replacement_tolerances(given: Optional[GoalTolerances], joints: Sequence[str],
                           path: np.ndarray) -> Optional[GoalTolerances]:
    """The tolerances of an arm's replacement goals (a speed change, a pause, a resume, a
    controlled stop, a failed peer's stop): its own goal's (``given``), with a path position
    tolerance on every joint that has none: the executor's own path tolerance there (``path``
    (J,) in the order of ``joints``, rad or m; 0: none added). A replacement continues the arm's
    running goal; a controller (joint_trajectory_controller, the simulated ones) aborts one
    its arm is not following, and holds, instead of pulling the arm onto it: an arm held by
    its own controller after an abort the executor has not read yet, or moved by hand, is not
    dragged by the stop sent to it as a peer (a simulator-wide abort read for one arm first
    sent the other a peer stop that pulled it 0.12 rad). None: no tolerance at all."""
    given = given or GoalTolerances()
    have = {t.name for t in given.path if t.position != 0.0}
    added = tuple(JointTolerance(j, position=float(p)) for j, p in zip(joints, path)
                  if p > 0 and j not in have)
    if not added and given == GoalTolerances():
        return None
    return GoalTolerances(tuple(given.path) + added, given.goal, given.goal_time)
