"""The extremes of the reference a joint_trajectory_controller actually runs between waypoints.

Waypoint velocities and finite differences can all be within a limit while the spline between
two waypoints is not: a cubic through (0, v0) and (T, v1) with a large position step peaks at
1.5 x its mean velocity, a quintic at 1.875 x. The controller's rule (JTC) picks the spline per
trajectory: quintic where accelerations are given, cubic where velocities are, linear otherwise.

Positions overshoot the same way: a cubic through (0, v0=1.1) and (T, v1=0) rising 0.7 rad
peaks at 0.86 rad, past a 0.785 limit that both waypoints respect; time scaling keeps the path,
so no speed factor helps.

Extremes are exact: the position on a segment is extreme at an end or where the velocity (a
quartic in local time) vanishes, |v| where the acceleration (a cubic) vanishes, |a| where the
jerk (a quadratic) vanishes; the roots are computed for every segment and joint at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mj_manipulator_ros.core.interpolation import interpolation_of, segment_coefficients
from mj_manipulator_ros.core.object_cache import kept
from mj_manipulator_ros.core.plan import ArmTrajectory


@dataclass(frozen=True)
class SegmentPeaks:
    """Per segment k (waypoints k -> k+1) and joint j, shape (N-1, J): the lowest and highest
    position (rad or m), the largest |velocity| (per s) and |acceleration| (per s^2) of the
    spline the controller runs."""

    velocity: np.ndarray
    acceleration: np.ndarray
    position_min: np.ndarray
    position_max: np.ndarray


def segment_peaks(traj: ArmTrajectory) -> SegmentPeaks:
    """Exact extremes of the executed spline of every segment (empty arrays for one waypoint).
    Computed once per trajectory (its arrays are read-only: they cannot go stale) and kept
    while it lives: validation and the pre-flight replay's range check ask for the same."""
    return kept(_peaks_of, traj, _segment_peaks)


#: id of a trajectory -> its SegmentPeaks (arrays read-only), while the trajectory lives
_peaks_of: dict[int, SegmentPeaks] = {}


def _segment_peaks(traj: ArmTrajectory) -> SegmentPeaks:
    n, j = traj.positions.shape
    if n < 2:
        empty = np.zeros((0, j))
        return SegmentPeaks(empty, empty, empty, empty)
    zeros = np.zeros_like(traj.positions)
    vel = traj.velocities if traj.velocities is not None else zeros
    acc = traj.accelerations if traj.accelerations is not None else zeros
    T = np.diff(traj.times)
    c = segment_coefficients(traj.positions[:-1], vel[:-1], acc[:-1], traj.positions[1:],
                             vel[1:], acc[1:], T, interpolation_of(traj))   # (6, S, J)
    Tb = np.broadcast_to(T[:, None], c.shape[1:])
    k = np.arange(6).reshape(6, 1, 1)
    v = c[1:] * k[1:]                      # v(s): coefficients of s^0..s^4
    a = v[1:] * k[1:5]                     # a(s): s^0..s^3
    jerk = a[1:] * k[1:4]                  # j(s): s^0..s^2
    # each polynomial's extremes lie at the ends or where its derivative vanishes
    p_lo, p_hi = _extremes(c, v, Tb)
    v_lo, v_hi = _extremes(v, a, Tb)
    a_lo, a_hi = _extremes(a, jerk, Tb)
    out = SegmentPeaks(np.maximum(-v_lo, v_hi), np.maximum(-a_lo, a_hi), p_lo, p_hi)
    for values in (out.velocity, out.acceleration, out.position_min, out.position_max):
        values.flags.writeable = False   # shared by every caller
    return out


def _extremes(poly: np.ndarray, deriv: np.ndarray, T: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) of poly(s) over s in [0, T] (elementwise), with the interior extrema at the
    real roots of ``deriv`` (coefficients of s^0, s^1, ..., shape (K, ...))."""
    candidates = [np.zeros_like(T), T] + _roots(deriv, T)
    lo = np.full(T.shape, np.inf)
    hi = np.full(T.shape, -np.inf)
    for s in candidates:
        inside = np.isfinite(s) & (s >= 0) & (s <= T)
        sv = np.where(inside, s, 0.0)
        val = sum(poly[k] * sv**k for k in range(poly.shape[0]))
        lo = np.where(inside, np.minimum(lo, val), lo)
        hi = np.where(inside, np.maximum(hi, val), hi)
    return lo, hi


def _roots(d: np.ndarray, T: np.ndarray | None = None) -> list[np.ndarray]:
    """Real roots of d0 + d1 s + ... + d_K s^K (elementwise; K <= 4); NaN where there is none.
    Each element uses the degree its leading coefficients give it (numerically zero ones
    dropped); the roots of degree 1 and 2 in closed form, of higher ones the eigenvalues of
    the companion matrix.

    With ``T`` (same shape as an element's), only roots in [0, T] are wanted: an element whose
    constant term outweighs what the rest can reach there, |d0| > sum |d_k| T^k, has none and
    is not solved (most segments of a finely timed plan: 0.01 s long, their derivatives barely
    change; a 1,900-waypoint plan's roots took 0.16 s of its 0.22 s validation)."""
    K = d.shape[0] - 1
    out = [np.full(d.shape[1:], np.nan) for _ in range(max(K, 1))]
    scale = np.max(np.abs(d), axis=0) + 1e-300
    degree = np.zeros(d.shape[1:], dtype=int)
    for k in range(1, K + 1):
        degree = np.where(np.abs(d[k]) > 1e-12 * scale, k, degree)
    if T is not None:
        reach = sum(np.abs(d[k]) * np.abs(T) ** k for k in range(1, K + 1))
        # (the slack covers the rounding of both sides: a root at an end is kept)
        degree = np.where(np.abs(d[0]) <= reach * (1.0 + 1e-9) + 1e-300, degree, 0)
    for n in range(1, K + 1):
        idx = np.nonzero(degree == n)
        if idx[0].size == 0:
            continue
        if n <= 2:
            for i, root in enumerate(_low_degree_roots(d, idx, n)):
                out[i][idx] = root
            continue
        lead = d[n][idx]
        comp = np.zeros((lead.size, n, n))
        comp[:, 0, :] = -np.stack([d[n - 1 - i][idx] for i in range(n)], axis=1) / lead[:, None]
        for i in range(1, n):
            comp[:, i, i - 1] = 1.0
        roots = np.linalg.eigvals(comp)                                    # (M, n)
        real = np.where(np.abs(roots.imag) <= 1e-9 * (1 + np.abs(roots.real)), roots.real, np.nan)
        for i in range(n):
            out[i][idx] = real[:, i]
    return out


def _low_degree_roots(d: np.ndarray, idx: tuple, n: int) -> list[np.ndarray]:
    """The real roots of the elements ``idx`` of degree ``n`` (1 or 2), NaN where none: a
    quadratic's by the cancellation-free form (q = -(b + sign(b) sqrt(b^2 - 4ac)) / 2, the
    roots q / a and c / q; a double root where the discriminant is zero)."""
    if n == 1:
        return [-d[0][idx] / d[1][idx]]
    a, b, c = d[2][idx], d[1][idx], d[0][idx]
    disc = b * b - 4.0 * a * c
    real = disc >= 0.0
    q = -0.5 * (b + np.copysign(np.sqrt(np.where(real, disc, 0.0)), b))
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where(real, q / a, np.nan)
        r2 = np.where(real & (q != 0.0), c / q, np.where(real, r1, np.nan))
    return [r1, r2]
