"""A plan slowed where needed: one time scaling of every arm's trajectory by a speed profile over
plan time, keeping each arm's path and the arms' synchronization (every arm is at the plan time
``s(t)`` at time ``t``, as before).

The profile ``g(s)`` (0 < g <= 1, the plan's speed at plan time s) is given on a grid and made
smooth enough by :func:`limit_slope` (|dg/ds| bounded, so ``s'' = g g'`` is bounded); then
``t(s) = integral ds / g``, and each arm's waypoints are the plan sampled at ``s(t_k)`` on a
uniform grid of ``t``: positions q(s), velocities ``q'(s) g``, accelerations
``q''(s) g^2 + q'(s) g g'(s)`` (``'``: d/ds on the original plan). Whether the result keeps the
joints' limits is the caller's to check (``core/validation.validate_plan``).

Shapes: M profile samples; K output waypoints; J joints of an arm.
"""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan

#: plan-time spacing of the profile the time mapping is integrated on, s
PROFILE_SPACING_S = 0.002
#: time between the slowed plan's waypoints, s (the plan's own spacing when that is finer)
WAYPOINT_SPACING_S = 0.01


def limit_slope(s: np.ndarray, g: np.ndarray, slope: float) -> np.ndarray:
    """The largest profile below ``g`` (M,) on the grid ``s`` (M,) whose slope is at most
    ``slope`` (per s of plan time) either way: a slow-down starts early enough and a speed-up
    ends late enough (one backward and one forward pass)."""
    out = np.array(g, dtype=float)
    ds = np.diff(s)
    for k in range(out.size - 2, -1, -1):           # slow down before a slow part
        out[k] = min(out[k], out[k + 1] + slope * ds[k])
    for k in range(1, out.size):                     # speed up only after it
        out[k] = min(out[k], out[k - 1] + slope * ds[k - 1])
    return out


def time_map(duration: float, s: np.ndarray, g: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The profile ``g`` (M,) at plan times ``s`` (M,) on a fine grid over ``[0, duration]``:
    (plan times, speeds, time at each plan time ``t(s)`` by the trapezoid rule on 1/g), s."""
    fine = np.linspace(0.0, duration, max(2, int(np.ceil(duration / PROFILE_SPACING_S)) + 1))
    gf = np.interp(fine, s, g)
    t_of_s = np.concatenate([[0.0], np.cumsum(0.5 * (1.0 / gf[1:] + 1.0 / gf[:-1])
                                              * np.diff(fine))])
    return fine, gf, t_of_s


def retimed(plan: MultiArmPlan, s: np.ndarray, g: np.ndarray
            ) -> tuple[MultiArmPlan, np.ndarray]:
    """``plan`` run at speed ``g`` (M,) at plan times ``s`` (M,; from 0 to the plan's duration,
    increasing; 0 < g <= 1, linear between samples): every arm on one time grid. Returns it and
    the original's plan time at each of its waypoints (K,).

    Raises:
        ValueError: a speed not in (0, 1], or a grid that does not cover the plan.
    """
    s = np.asarray(s, dtype=float)
    g = np.asarray(g, dtype=float)
    if s.shape != g.shape or s.size < 2 or not np.all(np.diff(s) > 0) or \
            s[0] > 0.0 or s[-1] < plan.duration - 1e-9:
        raise ValueError(f"a speed profile over the plan's {plan.duration:.3f} s is needed "
                         f"(increasing plan times from 0); got {s.size} samples over "
                         f"[{s[0] if s.size else float('nan'):.3f}, "
                         f"{s[-1] if s.size else float('nan'):.3f}] s")
    if not (np.all(g > 0.0) and np.all(g <= 1.0 + 1e-12)):
        bad = int(np.flatnonzero(~((g > 0.0) & (g <= 1.0 + 1e-12)))[0])
        raise ValueError(f"speed {g[bad]!r} at plan time {s[bad]:.3f} s: expected 0 < speed <= 1")
    fine, gf, t_of_s = time_map(plan.duration, s, g)
    dg = np.gradient(gf, fine) if fine.size > 2 else np.zeros_like(gf)
    total = float(t_of_s[-1])
    spacing = min(WAYPOINT_SPACING_S, _own_spacing(plan))
    t_out = np.linspace(0.0, total, max(2, int(np.ceil(total / spacing)) + 1))
    s_out = np.interp(t_out, t_of_s, fine)
    rate = np.interp(s_out, fine, gf)                 # ds/dt
    rate_dot = rate * np.interp(s_out, fine, dg)      # d2s/dt2 = g g'
    arms = {}
    for name, traj in plan.arms.items():
        q, v, a = sample(traj, s_out)
        arms[name] = ArmTrajectory(traj.joint_names, t_out, q, v * rate[:, None],
                                   a * (rate ** 2)[:, None] + v * rate_dot[:, None], arm=name)
    return MultiArmPlan(arms), s_out


def _own_spacing(plan: MultiArmPlan) -> float:
    """The plan's smallest time between waypoints (s; inf for single points)."""
    gaps = [float(np.diff(t.times).min()) for t in plan.arms.values() if t.times.size > 1]
    return min(gaps) if gaps else float("inf")
