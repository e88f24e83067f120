"""Watching an execution while it runs, on the arms' joint states: tracking error and arms out
of step. Plain values in, a verdict out: the ROS layer feeds it messages.

For a joint-state message stamped ``stamp`` (the controller's clock, the clock the start stamp
is on), the plan time is ``t = stamp - start``:

- **tracking error** per joint: measured position minus the plan's position at t (the spline
  the controller runs; before the start the first waypoint, after the end the last). Above the
  joint's path tolerance: ``tracking_error``.
- **progress**: the plan time that explains the measured pose: the tau near t at which the
  plan's pose is nearest the measured one, sought only over the stretch around t on which the
  plan keeps moving the way it moves at t (sampled every ``TAU_STEP_S``, refined by a parabola).
  It is estimated only where the plan moves faster than ``MIN_SPEED`` (a still arm's progress
  is undefined) and counts for ``MAX_AGE_S``. Two arms whose progress differs by
  more than ``max_progress_skew_s``: ``progress_skew``.

Each message is checked as it arrives (no thread, no polling): detection comes with the message
that crosses a threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.sync import PlanClock

#: below this plan speed (norm over the arm's joints, rad/s or m/s) progress is not estimated
MIN_SPEED = 0.3
#: a progress estimate older than this (s of plan time) no longer counts for the skew
MAX_AGE_S = 0.05
#: the progress search grid, s
TAU_STEP_S = 0.005


@dataclass(frozen=True)
class Violation:
    """What tripped the watch. ``reason`` is ``tracking_error`` or ``progress_skew``."""

    reason: str
    arm: str
    text: str
    plan_time: float


class ExecutionWatch:
    """Args:
        plan: the plan being executed (validated).
        start: the start stamp, s (controllers' clock).
        clock: plan time from the controllers' clock (after a speed change); default: the
            plan at speed 1 from ``start``.
        config: tolerances (``execution.path_tolerance_rad``, ``arms[].path_tolerance``,
            ``execution.max_progress_skew_s``).
    """

    def __init__(self, plan: MultiArmPlan, start: float, config: ExecutorConfig,
                 clock: Optional[PlanClock] = None) -> None:
        self.plan, self.start = plan, start
        self.clock = clock or PlanClock(start)   # plan time from a message stamp
        s = config.execution
        self.max_skew = s.max_progress_skew_s
        half = max(2.0 * self.max_skew, 0.2)     # how far from the plan time progress is sought
        self._offsets = np.arange(-half, half + TAU_STEP_S / 2, TAU_STEP_S)
        self.tolerance: dict[str, np.ndarray] = {}
        self.joints: dict[str, tuple[str, ...]] = {}
        for arm in plan.arm_names:
            cfg = config.arm(arm)
            names = tuple(plan[arm].joint_names)
            self.joints[arm] = names
            self.tolerance[arm] = np.array([cfg.path_tolerance.get(j, s.path_tolerance_rad)
                                            for j in names])
        # the plan sampled once on the progress grid (the search slices it; no spline is
        # evaluated per message for it)
        self._dense = {}
        for arm in plan.arm_names:
            grid = np.arange(0.0, plan[arm].duration + TAU_STEP_S / 2, TAU_STEP_S)
            p, v, _ = sample(plan[arm], grid)
            self._dense[arm] = (grid, p, v)
        self.max_tracking_error = {a: 0.0 for a in plan.arm_names}
        self.max_progress_skew = 0.0
        self._progress: dict[str, tuple[float, float]] = {}  # arm -> (plan time, progress)
        self.done: set[str] = set()   # arms no longer watched (their goal ended)
        self.violation: Optional[Violation] = None

    def set_start(self, start: float) -> None:
        """The start stamp, once known (the watch is built before it, off the stamp's path)."""
        self.start = start
        self.clock = PlanClock(start)

    def on_joint_state(self, names: Sequence[str], positions: Sequence[float],
                       stamp: float) -> Optional[Violation]:
        """Check one message; returns the (first) violation it causes, else None."""
        if self.violation is not None:
            return None
        index = {n: k for k, n in enumerate(names)}
        t = self.clock.plan_time(stamp)
        for arm, joints in self.joints.items():
            if arm in self.done or not all(j in index for j in joints):
                continue
            q = np.array([positions[index[j]] for j in joints])
            traj = self.plan[arm]
            err = q - self._planned(arm, t)
            tol = self.tolerance[arm]
            self.max_tracking_error[arm] = max(self.max_tracking_error[arm],
                                               float(np.max(np.abs(err), initial=0.0)))
            over = np.flatnonzero((tol > 0) & (np.abs(err) > tol))
            if over.size:
                k = int(over[np.argmax(np.abs(err[over]) - tol[over])])
                return self._trip("tracking_error", arm, t,
                                  f"joint {joints[k]!r} is {err[k]:+.4f} from the plan at plan time "
                                  f"{t:.3f} s, beyond its path tolerance {tol[k]:g}")
            if 0.0 <= t <= traj.duration:
                progress = self._progress_of(arm, q, t)
                if progress is not None:
                    self._progress[arm] = (t, progress)
        return self._skew(t)

    def _planned(self, arm: str, t: float) -> np.ndarray:
        """The plan's position at plan time t (J,), linear between the dense samples (within
        a * TAU_STEP_S^2 / 8 of the spline: 0.06 mrad at 20 rad/s^2), held before and after."""
        grid, dense_p, _ = self._dense[arm]
        x = min(max(t, 0.0), float(grid[-1])) / TAU_STEP_S
        i = min(int(x), grid.size - 2) if grid.size > 1 else 0
        if grid.size == 1:
            return dense_p[0]
        w = x - i
        return dense_p[i] * (1.0 - w) + dense_p[i + 1] * w

    def _progress_of(self, arm: str, q: np.ndarray, t: float) -> Optional[float]:
        """The plan time near t whose pose is nearest ``q``, searched only where the plan keeps
        moving the way it moves at t (no reversal: an out-and-back path passes every pose twice,
        and a pose near its turn would otherwise match either side). None when that cannot be
        decided: the plan is slow at t, or the nearest pose lies at the edge of that stretch."""
        grid, dense_p, dense_v = self._dense[arm]
        half = self._offsets.size // 2
        i0 = int(np.clip(round(t / TAU_STEP_S), 0, grid.size - 1))
        first, last = max(i0 - half, 0), min(i0 + half, grid.size - 1)
        taus, ps, vs = grid[first:last + 1], dense_p[first:last + 1], dense_v[first:last + 1]
        centre = i0 - first
        v0 = vs[centre]
        if np.linalg.norm(v0) < MIN_SPEED:
            return None
        forward = (vs @ v0) > 0.5 * float(v0 @ v0)   # still moving the same way, not much slower
        lo = hi = centre
        while lo > 0 and forward[lo - 1]:
            lo -= 1
        while hi < taus.size - 1 and forward[hi + 1]:
            hi += 1
        dist = np.linalg.norm(ps[lo:hi + 1] - q, axis=1)
        k = int(np.argmin(dist)) + lo
        if (k == lo and lo > 0) or (k == hi and hi < taus.size - 1):
            return None  # the nearest pose is outside the stretch: not decided here
        tau = float(taus[k])
        if lo < k < hi:  # parabola through the best sample and its neighbours
            d0, d1, d2 = dist[k - 1 - lo], dist[k - lo], dist[k + 1 - lo]
            curve = d0 - 2 * d1 + d2
            if curve > 0:
                tau += float(np.clip(0.5 * (d0 - d2) / curve, -1.0, 1.0)) * TAU_STEP_S
        return tau

    def _skew(self, t: float) -> Optional[Violation]:
        fresh = {a: prog for a, (at, prog) in self._progress.items()
                 if t - at <= MAX_AGE_S and a not in self.done}
        if len(fresh) < 2:
            return None
        ahead = max(fresh, key=fresh.get)
        behind = min(fresh, key=fresh.get)
        skew = fresh[ahead] - fresh[behind]
        self.max_progress_skew = max(self.max_progress_skew, skew)
        if self.max_skew > 0 and skew > self.max_skew:
            return self._trip("progress_skew", behind, t,
                              f"arm {behind!r} is {skew * 1e3:.0f} ms behind arm {ahead!r} at plan "
                              f"time {t:.3f} s (max_progress_skew_s {self.max_skew:g})")
        return None

    def _trip(self, reason: str, arm: str, t: float, text: str) -> Violation:
        self.violation = Violation(reason, arm, text, t)
        return self.violation

    def stats(self) -> Mapping[str, tuple[float, float]]:
        """Per arm: (max tracking error, rad; max progress skew, s) so far."""
        return {a: (self.max_tracking_error[a], self.max_progress_skew) for a in self.joints}
