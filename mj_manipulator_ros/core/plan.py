"""Multi-arm plans: per arm, joint names and a trajectory on a time grid shared by all arms.

Values are immutable: arrays are copied on construction and marked read-only. Construction only
checks what is needed to hold the data (sizes per waypoint); everything about the values
(finite, increasing times, limits, shared grid) is checked by
:func:`mj_manipulator_ros.core.validation.validate_plan` against a configuration.

Units: time in s; positions in rad (revolute) or m (prismatic); velocities per s;
accelerations per s².
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from mj_manipulator_ros.core.errors import PlanError, ShapeMismatchError, UnknownArmError


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float, copy=True)
    a.flags.writeable = False
    return a


def _number(value: object, arm: str, what: str, index: int | None = None,
            joint: str | None = None) -> float:
    """``value`` as a float: a real number (int or float; NaN and infinities pass, validation
    names them). Strings, booleans, containers and None are refused, as is an integer too large
    for a float.

    Raises:
        PlanError: naming arm, waypoint, joint, the value and what was expected.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise PlanError(f"{what} is {value!r} ({type(value).__name__}); expected a number",
                        arm=arm, index=index, joint=joint, value=value)
    try:
        return float(value)
    except OverflowError:
        raise PlanError(f"{what} is {value}, too large for a float; expected a number of at most "
                        f"{np.finfo(float).max:.3g}", arm=arm, index=index, joint=joint,
                        value=value) from None


def _numbers(arm: str, what: str, row: object, index: int,
             joint_names: Sequence[str] = ()) -> list[float]:
    """One waypoint's row of ``what`` as floats (see :func:`_number`).

    Raises:
        PlanError: the row is not a list of numbers.
    """
    if isinstance(row, np.ndarray) and row.ndim == 1 and np.issubdtype(row.dtype, np.number):
        return [float(x) for x in row]
    if not isinstance(row, (list, tuple, np.ndarray)):
        raise PlanError(f"{what} is {row!r} ({type(row).__name__}); expected a list of numbers, "
                        "one per joint", arm=arm, index=index, value=row)
    names = list(joint_names) + [None] * len(row)
    return [_number(x, arm, what[:-1] if what != "velocities" else "velocity", index, names[k])
            for k, x in enumerate(row)]


def _matrix(arm: str, what: str, rows: Sequence[Sequence[float]] | np.ndarray, n_points: int,
            n_joints: int) -> np.ndarray:
    """Stack per-waypoint rows into an (n_points, n_joints) array, naming the first bad row."""
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        if rows.shape != (n_points, n_joints):
            raise ShapeMismatchError(
                f"{what} has shape {rows.shape}, expected ({n_points}, {n_joints}) "
                f"(points, joints)", arm=arm)
        return _frozen(rows)
    if not isinstance(rows, (list, tuple, np.ndarray)):
        raise ShapeMismatchError(f"{what} is {rows!r}; expected one row per waypoint "
                                 f"({n_points})", arm=arm)
    rows = list(rows)
    if len(rows) != n_points:
        raise ShapeMismatchError(
            f"{what} has {len(rows)} rows, expected one per waypoint ({n_points})", arm=arm)
    rows = [_numbers(arm, what, row, i) for i, row in enumerate(rows)]
    for i, row in enumerate(rows):
        if len(row) != n_joints:
            raise ShapeMismatchError(
                f"{what} has {len(row)} values, expected {n_joints} (one per joint)",
                arm=arm, index=i, value=len(row))
    return _frozen(np.reshape(np.asarray(rows, dtype=float), (n_points, n_joints)))


@dataclass(frozen=True)
class ArmTrajectory:
    """One arm's trajectory.

    Attributes:
        joint_names: joint names, in the order of the array columns. Shape (J,).
        times: ``time_from_start`` of each waypoint, s. Shape (N,).
        positions: rad or m. Shape (N, J).
        velocities: per s, or None when not given. Shape (N, J).
        accelerations: per s², or None when not given. Shape (N, J).
    """

    joint_names: tuple[str, ...]
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None
    arm: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.joint_names, (str, bytes)) or \
                not isinstance(self.joint_names, (list, tuple, np.ndarray)) or \
                not all(isinstance(n, str) for n in self.joint_names):
            raise PlanError(f"joint_names is {self.joint_names!r}; expected a list of joint "
                            "names (strings)", arm=self.arm, value=self.joint_names)
        names = tuple(self.joint_names)
        object.__setattr__(self, "joint_names", names)
        if isinstance(self.times, np.ndarray) and np.issubdtype(self.times.dtype, np.number):
            times = np.asarray(self.times, dtype=float)
        elif isinstance(self.times, (list, tuple, np.ndarray)):
            times = np.asarray([_number(t, self.arm, "time_from_start", i)
                                for i, t in enumerate(self.times)], dtype=float)
        else:
            raise PlanError(f"times is {self.times!r}; expected one time_from_start per waypoint",
                            arm=self.arm, value=self.times)
        if times.ndim != 1:
            raise ShapeMismatchError(f"times has shape {times.shape}, expected (N,)", arm=self.arm)
        object.__setattr__(self, "times", _frozen(times))
        n, j = times.shape[0], len(names)
        object.__setattr__(self, "positions", _matrix(self.arm, "positions", self.positions, n, j))
        for name in ("velocities", "accelerations"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _matrix(self.arm, name, value, n, j))

    @classmethod
    def from_points(cls, arm: str, joint_names: Sequence[str],
                    points: Iterable[Mapping[str, object]]) -> "ArmTrajectory":
        """Build from point dicts ``{time_from_start, positions, velocities?, accelerations?}``.

        Velocities and accelerations must be given for every point or for none.
        """
        if not isinstance(points, (list, tuple)):
            raise PlanError(f"points is {points!r}; expected a list of waypoints", arm=arm)
        points = list(points)
        times, pos, vel, acc = [], [], [], []
        for i, p in enumerate(points):
            if not isinstance(p, Mapping):
                raise PlanError(f"the waypoint is {p!r}; expected a mapping {{time_from_start, "
                                "positions, velocities?, accelerations?}", arm=arm, index=i)
            unknown = set(p) - {"time_from_start", "positions", "velocities", "accelerations"}
            if unknown:
                raise PlanError(f"unknown point keys {sorted(unknown)}; expected time_from_start, "
                                "positions, velocities, accelerations", arm=arm, index=i)
            if "time_from_start" not in p or "positions" not in p:
                raise PlanError("a point needs time_from_start and positions", arm=arm, index=i)
            times.append(_number(p["time_from_start"], arm, "time_from_start", i))
            pos.append(p["positions"])
            vel.append(p.get("velocities"))
            acc.append(p.get("accelerations"))

        def optional(name: str, rows: list) -> list | None:
            given = [r is not None for r in rows]
            if not any(given):
                return None
            if not all(given):
                missing = given.index(False)
                raise ShapeMismatchError(f"{name} given for some points but not this one; give "
                                         "them for every point or none", arm=arm, index=missing)
            return rows

        return cls(joint_names, np.asarray(times, dtype=float), pos,
                   optional("velocities", vel), optional("accelerations", acc), arm=arm)

    @property
    def duration(self) -> float:
        """Last ``time_from_start``, s (0 for an empty trajectory)."""
        return float(self.times[-1]) if self.times.size else 0.0

    def time_scaled(self, factor: float) -> "ArmTrajectory":
        """The same path at ``factor`` times the speed (0.1 = 10 %): times / factor,
        velocities * factor, accelerations * factor²."""
        return ArmTrajectory(
            self.joint_names, self.times / factor, self.positions,
            None if self.velocities is None else self.velocities * factor,
            None if self.accelerations is None else self.accelerations * factor**2,
            arm=self.arm)


@dataclass(frozen=True)
class MultiArmPlan:
    """Trajectories of several arms that run together on one time grid.

    Attributes:
        arms: arm name -> trajectory, in a fixed order (config order when loaded from a file).
    """

    arms: Mapping[str, ArmTrajectory]

    def __post_init__(self) -> None:
        arms = {}
        for name, traj in dict(self.arms).items():
            if traj.arm != name:
                traj = ArmTrajectory(traj.joint_names, traj.times, traj.positions,
                                     traj.velocities, traj.accelerations, arm=name)
            arms[name] = traj
        object.__setattr__(self, "arms", arms)

    @property
    def arm_names(self) -> tuple[str, ...]:
        return tuple(self.arms)

    @property
    def duration(self) -> float:
        """Longest arm duration, s."""
        return max((t.duration for t in self.arms.values()), default=0.0)

    def __getitem__(self, arm: str) -> ArmTrajectory:
        try:
            return self.arms[arm]
        except KeyError:
            raise UnknownArmError(f"no arm {arm!r} in the plan; it has {list(self.arms)}") from None

    def time_scaled(self, factor: float) -> "MultiArmPlan":
        """The plan at ``factor`` times its speed (0 < factor; 0.1 = 10 % speed).

        Raises:
            PlanError: factor is not a positive finite number.
        """
        if not (np.isfinite(factor) and factor > 0):
            raise PlanError(f"speed factor must be a positive finite number, got {factor!r}")
        return MultiArmPlan({n: t.time_scaled(factor) for n, t in self.arms.items()})

    def subset(self, arms: Sequence[str]) -> "MultiArmPlan":
        """Only the named arms (in the given order)."""
        return MultiArmPlan({a: self[a] for a in arms})
