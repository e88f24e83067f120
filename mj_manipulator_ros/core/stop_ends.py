"""Where controlled stops asked at many plan times come to rest, all at once.

The stop band a failure needs (``check/failure_band.py``) asks, for a request every 50 ms of the
plan, where the executor's controlled stop from there ends: :func:`plan_ramp` with ``f1 = 0``,
one request at a time, 0.3 s of the pre-flight gate for a 14 s plan. :func:`stop_ends` gives the
same figures with the ramp's length searched for every request in lockstep (one plan sample per
arm per step for all of them): the same lower bound, the same lengthenings, the same
bisections, each measuring the exact composed motion on the same grid with the same
arithmetic, so every comparison with ``SEARCH_USE`` goes the same way; then, per request, the
goal as it would be sent checked on its splines exactly as :func:`plan_ramp` does (its own
code). ``test_stop_ends.py`` compares the two on the shipped plans and random ones, bit for bit.

Shapes: K requests, M samples of a ramp, J joints of an arm. Times in s.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.time_scaling import (FINAL_GROWTH, FINAL_TRIES, MAX_RAMP_S,
                                                   MIN_RAMP_S, REFINE_STEPS, SEARCH_GROWTH,
                                                   SEARCH_SPACING_S, SEARCH_USE, JointBounds,
                                                   TimeScaling, peak_use, ramp_trajectory)


def stop_ends(plan: MultiArmPlan, bounds: Mapping[str, JointBounds], starts, f0: float
              ) -> np.ndarray:
    """``plan_ramp(plan, s, f0, 0.0, bounds).end_plan_time`` for every ``s`` of ``starts``
    (K,), s of plan time; NaN where it raises RampLimitError (no stop within the bounds)."""
    duration = plan.duration
    s0 = np.minimum(np.maximum(np.asarray(starts, dtype=float), 0.0), duration)
    out = np.full(s0.size, np.nan)
    out[s0 <= 0.0] = 0.0   # nothing has moved: a hold at the plan's start
    todo = np.flatnonzero(s0 > 0.0)
    if not todo.size:
        return out
    lengths, failed = _Search(plan, bounds, s0[todo], f0).lengths()
    for k, T, gave_up in zip(todo, lengths, failed):
        if not gave_up:
            out[k] = _sent(plan, bounds, float(s0[k]), f0, float(T))
    return out


class _Search:
    """plan_ramp's search for the ramp's length, for K requests in lockstep."""

    def __init__(self, plan: MultiArmPlan, bounds: Mapping[str, JointBounds], s0: np.ndarray,
                 f0: float) -> None:
        self.plan, self.bounds, self.s0, self.f0 = plan, bounds, s0, float(f0)
        self.remaining = plan.duration - s0

    def _shape(self, T: np.ndarray, remaining: np.ndarray):
        """Per request, plan_ramp's ``shape(T)``: (f0, f1, duration) of the scaling and whether
        the plan's end comes first."""
        f0 = self.f0
        covered = 0.5 * (f0 + 0.0) * T
        ends = ~(covered < remaining - 1e-9)
        end_T = np.maximum(remaining / f0 if f0 > 0 else np.zeros_like(remaining), 1e-9)
        return (np.full(T.size, f0), np.where(ends, f0, 0.0), np.where(ends, end_T, T)), ends

    def _peaks(self, idx: np.ndarray, f0: np.ndarray, f1: np.ndarray, T: np.ndarray
               ) -> np.ndarray:
        """plan_ramp's ``composed(scaling)[0]`` for the requests ``idx`` with scalings (f0, f1,
        T) (RAMP kind), each on its own grid, computed together."""
        counts = np.array([np.arange(0.0, t + SEARCH_SPACING_S / 2, SEARCH_SPACING_S).size
                           for t in T])
        grid = np.arange(0.0, float(T.max()) + SEARCH_SPACING_S, SEARCH_SPACING_S)
        owner = np.repeat(np.arange(idx.size), counts)
        tau = np.concatenate([grid[:n] for n in counts])
        # TimeScaling.at, RAMP, elementwise with each request's own scalars
        Tk, f0k, f1k = T[owner], f0[owner], f1[owner]
        u = np.clip(tau / Tk, 0.0, 1.0)
        after = np.maximum(tau - Tk, 0.0)
        df = f1k - f0k
        advanced = f0k * np.minimum(tau, Tk) + df * Tk * (u**3 - 0.5 * u**4) + f1k * after
        rate = f0k + df * (3 * u**2 - 2 * u**3)
        rate_dot = np.where(tau < Tk, df * (6 * u - 6 * u**2) / Tk, 0.0)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        worst = np.zeros(idx.size)
        for arm, traj in self.plan.arms.items():
            _, v, a = sample(traj, self.s0[idx][owner] + advanced)
            b = self.bounds[arm]
            for values, limit in ((v * rate[:, None], b.velocity),
                                  (a * (rate**2)[:, None] + v * rate_dot[:, None],
                                   b.acceleration)):
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(np.isfinite(limit), np.abs(values) / limit, 0.0)
                if ratio.shape[1]:   # as plan_ramp: a figure that is not a number is passed
                    m = np.maximum.reduceat(ratio.max(axis=1), starts)   # over (0 / 0)
                    worst = np.where(m > worst, m, worst)
        return worst

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Every request's ramp length as plan_ramp's search leaves it (before the goals are
        checked as sent), and where the search gave up (past MAX_RAMP_S: RampLimitError)."""
        K = self.s0.size
        T = np.full(K, MIN_RAMP_S)
        for arm, traj in self.plan.arms.items():   # the lower bound from the dominant term
            _, v, _ = sample(traj, self.s0)
            a_max = self.bounds[arm].acceleration
            with np.errstate(divide="ignore", invalid="ignore"):
                need = np.where(np.isfinite(a_max), 1.5 * abs(0.0 - self.f0) * np.abs(v) / a_max,
                                0.0)
            if need.shape[1]:   # Python's max(T, x), as plan_ramp: x not a number keeps T
                m = need.max(axis=1)
                T = np.where(m > T, m, T)
        bad = np.full(K, np.nan)
        grew = np.zeros(K, dtype=bool)
        failed = np.zeros(K, dtype=bool)
        ends = np.zeros(K, dtype=bool)
        active = np.ones(K, dtype=bool)
        while active.any():
            idx = np.flatnonzero(active)
            (f0, f1, dur), e = self._shape(T[idx], self.remaining[idx])
            ends[idx] = e
            active[idx[e]] = False   # a stop that is the plan's own end: searched no further
            go = ~e
            if not go.any():
                break
            peak = self._peaks(idx[go], f0[go], f1[go], dur[go])
            grow = idx[go][peak > SEARCH_USE]
            active[idx[go][peak <= SEARCH_USE]] = False
            bad[grow] = T[grow]
            grew[grow] = True
            T[grow] = T[grow] * SEARCH_GROWTH
            gave_up = grow[T[grow] > MAX_RAMP_S]
            failed[gave_up] = True
            active[gave_up] = False
        refine = np.flatnonzero(grew & ~ends & ~failed)
        lo, hi = bad[refine], T[refine]
        for _ in range(REFINE_STEPS):
            if not refine.size:
                break
            mid = 0.5 * (lo + hi)
            (f0, f1, dur), _ = self._shape(mid, self.remaining[refine])
            fits = self._peaks(refine, f0, f1, dur) <= SEARCH_USE
            hi, lo = np.where(fits, mid, hi), np.where(fits, lo, mid)
        T[refine] = hi
        return T, failed


def _sent(plan: MultiArmPlan, bounds: Mapping[str, JointBounds], s0: float, f0: float,
          T: float) -> float:
    """plan_ramp's last step for one request: the goals as they would be sent, checked on their
    splines, lengthened by 5 % up to FINAL_TRIES times; the ramp's end (NaN: none fits)."""
    remaining = plan.duration - s0
    for _ in range(FINAL_TRIES):
        scaling = TimeScaling.ramp(f0, 0.0, T)
        ends = not scaling.covered < remaining - 1e-9
        if ends:
            scaling = TimeScaling.ramp(f0, f0, max(remaining / f0 if f0 > 0 else 0.0, 1e-9))
        trajs = {a: ramp_trajectory(t, s0, scaling, False, None, 0.0, 0.0)
                 for a, t in plan.arms.items()}
        peak, _ = peak_use(trajs, bounds, 0.0, scaling.duration)
        if peak <= 1.0:
            return plan.duration if ends else s0 + scaling.covered
        if ends:
            return float("nan")
        T *= FINAL_GROWTH
    return float("nan")
