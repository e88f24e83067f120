"""The peaks of the reference a joint_trajectory_controller actually runs between waypoints.

Waypoint velocities and finite differences can all be within a limit while the spline between
two waypoints is not: a cubic through (0, v0) and (T, v1) with a large position step peaks at
1.5 x its mean velocity, a quintic at 1.875 x. The controller's rule (JTC) picks the spline per
trajectory: quintic where accelerations are given, cubic where velocities are, linear otherwise.

Peaks are exact: |v| on a segment is largest at an end or where the acceleration (a cubic in
local time) vanishes, and |a| at an end or where the jerk (a quadratic) vanishes; the roots are
computed for every segment and joint at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mj_manipulator_ros.core.interpolation import interpolation_of, segment_coefficients
from mj_manipulator_ros.core.plan import ArmTrajectory


@dataclass(frozen=True)
class SegmentPeaks:
    """Per segment k (waypoints k -> k+1) and joint j, shape (N-1, J): the largest |velocity|
    (per s) and |acceleration| (per s^2) of the spline the controller runs."""

    velocity: np.ndarray
    acceleration: np.ndarray


def segment_peaks(traj: ArmTrajectory) -> SegmentPeaks:
    """Exact peaks of the executed spline of every segment (empty arrays for one waypoint)."""
    n, j = traj.positions.shape
    if n < 2:
        return SegmentPeaks(np.zeros((0, j)), np.zeros((0, j)))
    zeros = np.zeros_like(traj.positions)
    vel = traj.velocities if traj.velocities is not None else zeros
    acc = traj.accelerations if traj.accelerations is not None else zeros
    T = np.diff(traj.times)
    c = segment_coefficients(traj.positions[:-1], vel[:-1], acc[:-1], traj.positions[1:],
                             vel[1:], acc[1:], T, interpolation_of(traj))   # (6, S, J)
    Tb = np.broadcast_to(T[:, None], c.shape[1:])
    # velocity v(s) = sum k c_k s^(k-1); its extrema where a(s) = 0, a cubic
    dv = np.stack([c[2] * 2, c[3] * 6, c[4] * 12, c[5] * 20])             # a(s) coefficients
    v_peak = _peak(np.stack([c[1], c[2] * 2, c[3] * 3, c[4] * 4, c[5] * 5]), dv, Tb)
    # acceleration a(s); its extrema where the jerk (a quadratic) vanishes
    da = np.stack([c[3] * 6, c[4] * 24, c[5] * 60, np.zeros_like(c[5])])
    a_peak = _peak(dv, da, Tb)
    return SegmentPeaks(v_peak, a_peak)


def _peak(poly: np.ndarray, deriv: np.ndarray, T: np.ndarray) -> np.ndarray:
    """max |poly(s)| over s in [0, T] (elementwise), with poly's extrema at the real roots of
    ``deriv`` (coefficients of s^0..s^3, shape (4, ...))."""
    candidates = [np.zeros_like(T), T]
    candidates += list(_cubic_roots(deriv))
    best = np.zeros_like(T)
    for s in candidates:
        inside = np.isfinite(s) & (s >= 0) & (s <= T)
        sv = np.where(inside, s, 0.0)
        val = np.abs(sum(poly[k] * sv**k for k in range(poly.shape[0])))
        best = np.maximum(best, np.where(inside, val, 0.0))
    return best


def _cubic_roots(d: np.ndarray) -> list[np.ndarray]:
    """Real roots of d0 + d1 s + d2 s^2 + d3 s^3 (elementwise); NaN where there is none. Each
    element uses the degree its leading coefficients give it (numerically zero ones dropped)."""
    d0, d1, d2, d3 = d
    scale = np.max(np.abs(d), axis=0) + 1e-300
    cubic = np.abs(d3) > 1e-12 * scale
    quad = ~cubic & (np.abs(d2) > 1e-12 * scale)
    lin = ~cubic & ~quad & (np.abs(d1) > 1e-12 * scale)
    out = [np.full(d0.shape, np.nan) for _ in range(3)]
    if lin.any():
        out[0] = np.where(lin, -d0 / np.where(lin, d1, 1.0), out[0])
    if quad.any():
        a, b, cc = (np.where(quad, x, 1.0) for x in (d2, d1, d0))
        disc = b * b - 4 * a * cc
        sq = np.sqrt(np.where(disc >= 0, disc, np.nan))
        out[0] = np.where(quad, (-b + sq) / (2 * a), out[0])
        out[1] = np.where(quad, (-b - sq) / (2 * a), out[1])
    if cubic.any():
        idx = np.nonzero(cubic)
        lead = d3[idx]
        comp = np.zeros((lead.size, 3, 3))
        comp[:, 0, :] = -np.stack([d2[idx], d1[idx], d0[idx]], axis=1) / lead[:, None]
        comp[:, 1, 0] = comp[:, 2, 1] = 1.0
        roots = np.linalg.eigvals(comp)                                    # (M, 3)
        real = np.where(np.abs(roots.imag) <= 1e-9 * (1 + np.abs(roots.real)), roots.real, np.nan)
        for k in range(3):
            out[k][idx] = real[:, k]
    return out
