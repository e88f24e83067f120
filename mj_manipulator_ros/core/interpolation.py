"""Trajectory interpolation as joint_trajectory_controller does it, and grid resampling.

Between two waypoints the spline is chosen by what the trajectory gives:
quintic when accelerations (and velocities) are given, cubic when only velocities are, linear
otherwise. Before the first waypoint a sample holds the first waypoint; after the last, the last.

Shapes: N waypoints, J joints, M sample times.
"""

from __future__ import annotations

import bisect
import enum

import numpy as np

from mj_manipulator_ros.core.errors import PlanError
from mj_manipulator_ros.core.object_cache import kept
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan


class Interpolation(enum.Enum):
    LINEAR = "linear"
    CUBIC = "cubic"
    QUINTIC = "quintic"


def interpolation_of(traj: ArmTrajectory) -> Interpolation:
    if traj.velocities is None:
        return Interpolation.LINEAR
    if traj.accelerations is None:
        return Interpolation.CUBIC
    return Interpolation.QUINTIC


def segment_coefficients(p0, v0, a0, p1, v1, a1, duration, kind: Interpolation) -> np.ndarray:
    """Polynomial coefficients c[k] (of s^k, s in [0, duration]) for segments.

    Args:
        p0, v0, a0, p1, v1, a1: boundary states, shape (..., J).
        duration: segment length, s, shape (...,) or scalar; > 0.
        kind: which spline.

    Returns:
        Coefficients, shape (6, ..., J); unused high orders are zero.
    """
    p0, v0, a0, p1, v1, a1 = (np.asarray(x, dtype=float) for x in (p0, v0, a0, p1, v1, a1))
    T = np.asarray(duration, dtype=float)[..., None]
    c = np.zeros((6,) + np.broadcast(p0, p1).shape)
    dp = p1 - p0
    c[0] = p0
    if kind is Interpolation.LINEAR:
        c[1] = dp / T
    elif kind is Interpolation.CUBIC:
        c[1] = v0
        c[2] = (3 * dp - (2 * v0 + v1) * T) / T**2
        c[3] = (-2 * dp + (v0 + v1) * T) / T**3
    else:
        c[1] = v0
        c[2] = a0 / 2
        c[3] = (20 * dp - (8 * v1 + 12 * v0) * T - (3 * a0 - a1) * T**2) / (2 * T**3)
        c[4] = (-30 * dp + (14 * v1 + 16 * v0) * T + (3 * a0 - 2 * a1) * T**2) / (2 * T**4)
        c[5] = (12 * dp - 6 * (v1 + v0) * T - (a0 - a1) * T**2) / (2 * T**5)
    return c


def evaluate(coefficients: np.ndarray, s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity and acceleration of polynomials at local time(s) ``s``.

    Args:
        coefficients: shape (6, ..., J).
        s: local time, s; shape broadcastable to (..., 1).
    """
    c = coefficients
    s = np.asarray(s, dtype=float)[..., None]
    pos = c[0] + s * (c[1] + s * (c[2] + s * (c[3] + s * (c[4] + s * c[5]))))
    vel = c[1] + s * (2 * c[2] + s * (3 * c[3] + s * (4 * c[4] + s * 5 * c[5])))
    acc = 2 * c[2] + s * (6 * c[3] + s * (12 * c[4] + s * 20 * c[5]))
    return pos, vel, acc


def sample(traj: ArmTrajectory, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample a trajectory at times (s from its start).

    Returns:
        positions, velocities, accelerations, each shape (M, J) (velocity and acceleration are
        zero outside [first, last] waypoint).
    """
    ts = np.atleast_1d(np.asarray(times, dtype=float))
    n, j = traj.positions.shape
    if n == 0:
        raise PlanError("cannot sample an empty trajectory", arm=traj.arm)
    if n == 1:
        return (np.repeat(traj.positions[:1], ts.size, 0), np.zeros((ts.size, j)),
                np.zeros((ts.size, j)))
    seg = np.searchsorted(traj.times, ts, side="right") - 1
    np.minimum(np.maximum(seg, 0, out=seg), n - 2, out=seg)
    t0, t1 = traj.times[seg], traj.times[seg + 1]
    d = _coefficients(traj)[seg]                      # (M, 6, 3J)
    x = (np.minimum(np.maximum(ts, t0), t1) - t0)[..., None]
    r = d[..., 5, :]
    for k in (4, 3, 2, 1, 0):   # Horner: position, velocity, acceleration side by side
        r = d[..., k, :] + x * r
    p, v, a = r[..., :j], r[..., j:2 * j], r[..., 2 * j:]
    before, after = ts < traj.times[0], ts > traj.times[-1]
    p[before], p[after] = traj.positions[0], traj.positions[-1]
    v[before | after] = 0.0
    a[before | after] = 0.0
    return p, v, a


def sample_rates(traj: ArmTrajectory, times) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sample`'s velocities and accelerations alone, each (M, J), the same numbers (the
    same arithmetic on the same coefficients, without the positions': a third less work where
    only rates are checked, as a stop's search checks them)."""
    ts = np.atleast_1d(np.asarray(times, dtype=float))
    n, j = traj.positions.shape
    if n < 2:
        return sample(traj, ts)[1:]
    seg = np.searchsorted(traj.times, ts, side="right") - 1
    np.minimum(np.maximum(seg, 0, out=seg), n - 2, out=seg)
    t0, t1 = traj.times[seg], traj.times[seg + 1]
    d = rate_coefficients(traj)[seg]                    # (M, 6, 2J)
    x = (np.minimum(np.maximum(ts, t0), t1) - t0)[..., None]
    r = d[..., 5, :]
    for k in (4, 3, 2, 1, 0):
        r = d[..., k, :] + x * r
    v, a = r[..., :j], r[..., j:]
    outside = (ts < traj.times[0]) | (ts > traj.times[-1])
    v[outside] = 0.0
    a[outside] = 0.0
    return v, a


def rate_coefficients(traj: ArmTrajectory) -> np.ndarray:
    """Every segment's velocity and acceleration coefficients of ``traj`` (N >= 2), (N-1, 6,
    2J), lowest power first, C-contiguous and read-only, kept while the trajectory lives."""
    def make(t: ArmTrajectory) -> np.ndarray:
        c = np.ascontiguousarray(_coefficients(t)[..., t.positions.shape[1]:])
        c.setflags(write=False)
        return c
    return kept(_rate_coefficients, traj, make)


#: id of a trajectory -> its segments' velocity and acceleration coefficients (N-1, 6, 2J)
_rate_coefficients: dict[int, np.ndarray] = {}


#: id of a trajectory -> every segment's coefficients of position, velocity and acceleration
#: (N-1, 6, 3J), while the trajectory lives (its arrays are read-only: they cannot go stale)
_segment_coefficients: dict[int, np.ndarray] = {}


def _coefficients(traj: ArmTrajectory) -> np.ndarray:
    """Every segment's coefficients of ``traj`` (N >= 2) with their derivatives'
    (:func:`_with_derivatives`), (N-1, 6, 3J): computed at its first sample and kept while it
    lives (a plan is sampled many times: the stop ramps of a band)."""
    def make(t: ArmTrajectory) -> np.ndarray:
        zeros = np.zeros_like(t.positions)
        vel = t.velocities if t.velocities is not None else zeros
        acc = t.accelerations if t.accelerations is not None else zeros
        c = segment_coefficients(t.positions[:-1], vel[:-1], acc[:-1], t.positions[1:],
                                 vel[1:], acc[1:], np.diff(t.times), interpolation_of(t))
        c = _with_derivatives(np.moveaxis(c, 0, 1))
        c.setflags(write=False)   # shared by every sample and Spline of the trajectory
        return c
    return kept(_segment_coefficients, traj, make)


class Spline:
    """A trajectory's spline with every segment's coefficients computed once: :meth:`at` is the
    per-control-cycle evaluation (a segment lookup and one small matrix product), equal to
    :func:`sample` at every time.

    Args:
        traj: the trajectory (N >= 1 waypoints).
        coefficients: instead of ``traj``'s segments, one polynomial (6, J) on [0, duration] that
            starts at ``start`` (s): used for the move to a trajectory's first point.
    """

    def __init__(self, traj: ArmTrajectory | None = None, *, coefficients: np.ndarray | None = None,
                 start: float = 0.0, duration: float = 0.0) -> None:
        if coefficients is not None:
            self._times = [start, start + duration]
            self._c = _with_derivatives(coefficients[None])            # (1, 6, 3J)
            p0 = coefficients[0]
            p1, _, _ = evaluate(coefficients, duration)
            ends = (p0, p1)
        else:
            n, j = traj.positions.shape
            if n == 0:
                raise PlanError("cannot sample an empty trajectory", arm=traj.arm)
            self._times = traj.times.tolist()
            if n >= 2:
                self._c = _coefficients(traj)                         # (N-1, 6, 3J)
            ends = (traj.positions[0], traj.positions[-1])
        zero = np.zeros_like(ends[0])
        self._shape = (3, zero.size)
        self._before = np.stack([ends[0], zero, zero])
        self._after = np.stack([ends[1], zero, zero])
        self._last_segment = len(self._times) - 2

    def at(self, t: float) -> np.ndarray:
        """Position, velocity and acceleration at time ``t`` (s, the trajectory's clock), shape
        (3, J); the rest state before the first and after the last time. Do not modify it."""
        times = self._times
        if t < times[0]:
            return self._before
        if t > times[-1]:
            return self._after
        if self._last_segment < 0:
            return self._after
        k = min(bisect.bisect_right(times, t) - 1, self._last_segment)
        s = t - times[k]
        s2 = s * s
        s3 = s2 * s
        return (np.array((1.0, s, s2, s3, s2 * s2, s3 * s2)) @ self._c[k]).reshape(self._shape)

    def parts(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """What a compiled :meth:`at` needs, contiguous float64: knot times (N,), coefficients
        (N-1, 6, 3J) or None with one knot, and the rest states before and after, (3J,) each."""
        coefficients = np.ascontiguousarray(self._c) if self._last_segment >= 0 else None
        return (np.asarray(self._times, dtype=float), coefficients,
                np.ascontiguousarray(self._before).ravel(), np.ascontiguousarray(self._after).ravel())


def _with_derivatives(c: np.ndarray) -> np.ndarray:
    """Per segment, the coefficients of position, velocity and acceleration side by side, so one
    row of powers of s times it gives all three: (S, 6, J) -> (S, 6, 3J)."""
    vel = np.zeros_like(c)
    acc = np.zeros_like(c)
    vel[:, :5] = c[:, 1:] * np.arange(1, 6)[None, :, None]
    acc[:, :4] = c[:, 2:] * (np.arange(2, 6) * np.arange(1, 5))[None, :, None]
    return np.ascontiguousarray(np.concatenate([c, vel, acc], axis=2))


def nearest_plan_time(traj: ArmTrajectory, q: np.ndarray, start: float, end: float,
                      step: float = 0.001, near: float | None = None,
                      tie: float = 0.0) -> tuple[float, float]:
    """The plan time in [start, end] (sampled every ``step`` s) whose pose is nearest ``q`` (J,)
    by the max-norm over the joints, and that distance. With ``near``: of the times whose
    distance is within ``tie`` of the nearest (where the plan barely moves, plan time is
    ambiguous), the one closest to ``near``."""
    ts = np.arange(start, end + step / 2, step)
    positions, _, _ = sample(traj, ts)
    dist = np.max(np.abs(positions - np.asarray(q, dtype=float)), axis=1)
    if near is None:
        i = int(np.argmin(dist))
    else:
        candidates = np.flatnonzero(dist <= dist.min() + tie)
        i = int(candidates[np.argmin(np.abs(ts[candidates] - near))])
    return float(ts[i]), float(dist[i])


def rest_to_rest(q0: np.ndarray, q1: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A quintic rest-to-rest move from q0 to q1 (J,) over ``times`` (N,), from times[0] to
    times[-1]. Returns positions and velocities, each (N, J); peak speed is 1.875 |q1 - q0| /
    duration, at mid-time."""
    times = np.asarray(times, dtype=float)
    duration = times[-1] - times[0]
    s = (times - times[0]) / duration
    h = 10 * s**3 - 15 * s**4 + 6 * s**5
    dh = (30 * s**2 - 60 * s**3 + 30 * s**4) / duration
    dq = np.asarray(q1, dtype=float) - np.asarray(q0, dtype=float)
    return np.asarray(q0, dtype=float) + np.outer(h, dq), np.outer(dh, dq)


def rest_to_rest_chain(keys, move_times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quintic rest-to-rest moves through ``keys`` (K poses, each (J,)), each over
    ``move_times`` (M,) from its first to its last entry, joined end to start. Returns
    positions and velocities, each (1 + (K - 1)(M - 1), J), on the moves' grid."""
    pos, vel = [], []
    for k in range(len(keys) - 1):
        p, v = rest_to_rest(keys[k], keys[k + 1], move_times)
        pos.append(p[1:] if k else p)
        vel.append(v[1:] if k else v)
    return np.concatenate(pos), np.concatenate(vel)


def resample_to_common_grid(plan: MultiArmPlan, dt: float) -> MultiArmPlan:
    """Put every arm on one uniform time grid 0, dt, 2 dt, ..., ending at the plan's duration.

    An arm that ends earlier holds its last waypoint. Velocities (and accelerations) are emitted
    for an arm that gave them, sampled from its spline. A linear arm resampled onto a grid that
    does not contain its waypoints cuts its corners slightly; pick ``dt`` dividing its steps.

    Raises:
        PlanError: ``dt`` is not positive and finite, or an arm has no waypoints.
    """
    if not (np.isfinite(dt) and dt > 0):
        raise PlanError(f"dt must be a positive finite number of seconds, got {dt!r}")
    duration = plan.duration
    grid = np.arange(0.0, duration + dt * 1e-6, dt)
    if duration - grid[-1] > 1e-9:
        grid = np.append(grid, duration)
    arms = {}
    for name, traj in plan.arms.items():
        p, v, a = sample(traj, grid)
        kind = interpolation_of(traj)
        arms[name] = ArmTrajectory(
            traj.joint_names, grid, p,
            v if kind is not Interpolation.LINEAR else None,
            a if kind is Interpolation.QUINTIC else None, arm=name)
    return MultiArmPlan(arms)


def remainder(traj: ArmTrajectory, t0: float, factor: float) -> ArmTrajectory:
    """The rest of ``traj`` from its plan time ``t0`` on, at ``factor`` times its speed, as a
    trajectory starting at time 0 (its first point the spline's state at ``t0``; then every
    later waypoint, at (t - t0) / factor). The path is the plan's: velocities * factor,
    accelerations * factor^2, the interpolation kind kept."""
    p, v, a = sample(traj, [t0])
    later = np.flatnonzero(traj.times > t0 + 1e-6)
    times = np.concatenate([[0.0], (traj.times[later] - t0) / factor])
    positions = np.vstack([p, traj.positions[later]])
    vel = None if traj.velocities is None else np.vstack([v, traj.velocities[later]]) * factor
    acc = None if traj.accelerations is None else \
        np.vstack([a, traj.accelerations[later]]) * factor**2
    return ArmTrajectory(traj.joint_names, times, positions, vel, acc, arm=traj.arm)
