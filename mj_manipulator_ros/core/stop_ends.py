"""Where controlled stops asked at many plan times come to rest, all at once.

The stop band a failure needs (``check/failure_band.py``) asks, for a request every 50 ms of the
plan, where the executor's controlled stop from there ends: :func:`plan_ramp` with ``f1 = 0``,
one request at a time, 0.3 s of the pre-flight gate for a 14 s plan. :func:`stop_ends` gives the
same figures with the ramp's length searched for every request in lockstep (one plan sample per
arm per step for all of them): the same lower bound, the same lengthenings, the same
bisections, each measuring the exact composed motion on the same grid with the same
arithmetic, so every comparison with ``SEARCH_USE`` goes the same way; then the goals as they
would be sent checked on their splines as :func:`plan_ramp` checks them, every request's
together (:class:`_SentGoals`: the same knots, coefficients and samples element by element;
a plan of positions only, whose goals get knots where they pass its waypoints, one request at
a time with plan_ramp's own code). ``test_stop_ends.py`` compares the two on the shipped plans
and random ones, bit for bit.

Shapes: K requests, M samples of a ramp, J joints of an arm. Times in s.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from mj_manipulator_ros.core.interpolation import (_with_derivatives, interpolation_of,
                                                    rate_coefficients, sample, sample_rates,
                                                    segment_coefficients)
from mj_manipulator_ros.core.object_cache import kept
from mj_manipulator_ros.core.plan import MultiArmPlan
try:   # the search's rate samples in C (core/_rate_kernel.c); the numpy code otherwise
    from mj_manipulator_ros.core import _rate_kernel as KERNEL
except ImportError:   # pragma: no cover - built by setup.py wherever a compiler is
    KERNEL = None
from mj_manipulator_ros.core.time_scaling import (CHECK_SPACING_S, FINAL_GROWTH, FINAL_TRIES,
                                                   KNOT_SPACING_S, MAX_RAMP_S, MIN_RAMP_S,
                                                   REFINE_STEPS, SEARCH_GROWTH, SEARCH_SPACING_S,
                                                   SEARCH_USE, JointBounds, TimeScaling,
                                                   peak_use, ramp_trajectory)


def stop_ends(plan: MultiArmPlan, bounds: Mapping[str, JointBounds], starts, f0: float
              ) -> np.ndarray:
    """``plan_ramp(plan, s, f0, 0.0, bounds).end_plan_time`` for every ``s`` of ``starts``
    (K,), s of plan time; NaN where it raises RampLimitError (no stop within the bounds).

    Each figure is kept with the plan (by its start, the bounds and ``f0``, exactly): the
    pre-flight gate asks the same stops of the same plan twice where stop limits are set (the
    stop envelope of the plan it will run, then its stop band), and computes them once."""
    starts = np.asarray(starts, dtype=float)
    known = kept(_KNOWN, plan, lambda _p: {}).setdefault(
        (float(f0), tuple((a, b.velocity.tobytes(), b.acceleration.tobytes())
                          for a, b in sorted(bounds.items()))), {})
    out = np.array([known.get(float(x), np.nan) for x in starts.ravel()]).reshape(starts.shape)
    new = np.flatnonzero([float(x) not in known for x in starts.ravel()])
    if new.size:
        ends = _stop_ends(plan, bounds, starts.ravel()[new], f0)
        out.ravel()[new] = ends
        known.update(zip(starts.ravel()[new].tolist(), ends.tolist()))
    return out


#: plan -> (f0, bounds) -> start -> end, while the plan lives (plans are immutable)
_KNOWN: dict = {}


def _stop_ends(plan: MultiArmPlan, bounds: Mapping[str, JointBounds], starts: np.ndarray,
               f0: float) -> np.ndarray:
    """:func:`stop_ends`, computed."""
    duration = plan.duration
    s0 = np.minimum(np.maximum(np.asarray(starts, dtype=float), 0.0), duration)
    out = np.full(s0.size, np.nan)
    out[s0 <= 0.0] = 0.0   # nothing has moved: a hold at the plan's start
    todo = np.flatnonzero(s0 > 0.0)
    if not todo.size:
        return out
    lengths, failed = _Search(plan, bounds, s0[todo], f0).lengths()
    go = todo[~failed]
    if any(t.velocities is None for t in plan.arms.values()):
        # positions only: the goals get knots where they pass the plan's waypoints
        for k, T in zip(go, lengths[~failed]):
            out[k] = _sent(plan, bounds, float(s0[k]), f0, float(T))
    else:
        out[go] = _SentGoals(plan, bounds, f0).ends(s0[go], lengths[~failed])
    return out


def _ramp_at(tau: np.ndarray, T, f0, f1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``TimeScaling.at`` of RAMP scalings, element by element: each time of ``tau`` (s since
    its ramp's start) with its own ramp's duration ``T`` and rates ``f0``, ``f1`` (arrays of
    ``tau``'s shape, or scalars): plan time advanced, rate, its derivative; the same arithmetic
    in the same order, so the same numbers."""
    u = np.clip(tau / T, 0.0, 1.0)
    after = np.maximum(tau - T, 0.0)
    df = f1 - f0
    advanced = f0 * np.minimum(tau, T) + df * T * (u**3 - 0.5 * u**4) + f1 * after
    rate = f0 + df * (3 * u**2 - 2 * u**3)
    rate_dot = np.where(tau < T, df * (6 * u - 6 * u**2) / T, 0.0)
    return advanced, rate, rate_dot


class _Search:
    """plan_ramp's search for the ramp's length, for K requests in lockstep."""

    def __init__(self, plan: MultiArmPlan, bounds: Mapping[str, JointBounds], s0: np.ndarray,
                 f0: float, kernel=KERNEL) -> None:
        self.plan, self.bounds, self.s0, self.f0 = plan, bounds, s0, float(f0)
        self.remaining = plan.duration - s0
        self.kernel = kernel   # None: the numpy code (the kernel's reference)

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
        counts = _arange_sizes(T, SEARCH_SPACING_S)
        grid = np.arange(0.0, float(T.max()) + SEARCH_SPACING_S, SEARCH_SPACING_S)
        owner = np.repeat(np.arange(idx.size), counts)
        tau = np.concatenate([grid[:n] for n in counts])
        advanced, rate, rate_dot = _ramp_at(tau, T[owner], f0[owner], f1[owner])
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        worst = np.zeros(idx.size)
        for arm, traj in self.plan.arms.items():
            b = self.bounds[arm]
            ts = self.s0[idx][owner] + advanced
            if self.kernel is not None and traj.times.size >= 2 and traj.positions.shape[1]:
                peaks = np.empty((2, idx.size))
                self.kernel.peaks(np.ascontiguousarray(traj.times, dtype=float),
                                  rate_coefficients(traj), ts, rate, rate_dot,
                                  np.ascontiguousarray(b.velocity, dtype=float),
                                  np.ascontiguousarray(b.acceleration, dtype=float),
                                  starts.astype(np.int64), peaks[0], peaks[1])
                for m in peaks:   # velocity, then acceleration, as below
                    worst = np.where(m > worst, m, worst)
                continue
            v, a = sample_rates(traj, ts)
            for values, limit in ((v * rate[:, None], b.velocity),
                                  (a * (rate**2)[:, None] + v * rate_dot[:, None],
                                   b.acceleration)):
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(np.isfinite(limit), np.abs(values) / limit, 0.0)
                if ratio.shape[1]:   # as plan_ramp: a figure that is not a number is passed
                    m = np.maximum.reduceat(ratio, starts, axis=0).max(axis=1)   # (0 / 0)
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


def _arange_sizes(end: np.ndarray, spacing: float) -> np.ndarray:
    """(K,) ``np.arange(0.0, e + spacing / 2, spacing).size`` for each ``e`` of ``end``, with
    arange's own arithmetic (the ceiling of the span over the step)."""
    return np.maximum(np.ceil((end + spacing / 2) / spacing), 0).astype(np.int64)


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


class _SentGoals:
    """:func:`_sent` for many requests together (plans with velocities): each request's goals
    built and checked as ``ramp_trajectory`` and ``peak_use`` build and check them, with the same
    arithmetic element by element (knots, spline coefficients, samples), the work of all
    requests in a few large array operations instead of many small ones."""

    #: samples of the goals' splines per batch of requests (bounds the memory: each sample
    #: gathers its segment's coefficients, 6 x 3J numbers per arm)
    BATCH_SAMPLES = 40_000

    def __init__(self, plan: MultiArmPlan, bounds: Mapping[str, JointBounds], f0: float,
                 kernel=KERNEL) -> None:
        self.plan, self.bounds, self.f0 = plan, bounds, float(f0)
        self.kernel = kernel   # None: the numpy code (the kernel's reference)

    def ends(self, s0: np.ndarray, T: np.ndarray) -> np.ndarray:
        """(K,) the ramp's end plan time per request at plan time ``s0`` with searched length
        ``T`` (NaN: none fits), as :func:`_sent` gives it."""
        f0 = self.f0
        out = np.full(s0.size, np.nan)
        T = np.array(T, dtype=float)
        active = np.arange(s0.size)
        for _ in range(FINAL_TRIES):
            if not active.size:
                break
            remaining = self.plan.duration - s0[active]
            ends = ~(0.5 * (f0 + 0.0) * T[active] < remaining - 1e-9)
            end_T = np.maximum(remaining / f0 if f0 > 0 else np.zeros_like(remaining), 1e-9)
            dur = np.where(ends, end_T, T[active])
            f1 = np.where(ends, f0, 0.0)
            peak = self._peaks(s0[active], dur, f1)
            fits = peak <= 1.0
            out[active[fits & ends]] = self.plan.duration
            ok = fits & ~ends
            out[active[ok]] = s0[active[ok]] + 0.5 * (f0 + 0.0) * T[active[ok]]
            active = active[~fits & ~ends]
            T[active] = T[active] * FINAL_GROWTH
        return out

    def _peaks(self, s0: np.ndarray, dur: np.ndarray, f1: np.ndarray) -> np.ndarray:
        """(K,) peak_use of each request's goals (the scaling f0 -> f1 over ``dur``)."""
        knots = np.maximum(2, np.ceil(dur / KNOT_SPACING_S).astype(np.int64) + 1)
        checks = _arange_sizes(dur, CHECK_SPACING_S)
        out = np.zeros(s0.size)
        first, size = 0, 0
        for k in range(s0.size + 1):   # batches of whole requests
            if k == s0.size or (size and size + int(checks[k]) > self.BATCH_SAMPLES):
                sl = slice(first, k)
                out[sl] = self._batch(s0[sl], dur[sl], f1[sl], knots[sl])
                first, size = k, 0
            if k < s0.size:
                size += int(checks[k]) + 2 * int(knots[k])
        return out

    def _batch(self, s0: np.ndarray, dur: np.ndarray, f1: np.ndarray, n: np.ndarray
               ) -> np.ndarray:
        """:meth:`_peaks` for one batch: request i's goal has ``n[i]`` knots, ``np.linspace(0,
        dur[i], n[i])`` each, built here for every request at once with linspace's own
        arithmetic (j times the step, the last knot ``dur[i]`` itself)."""
        f0 = self.f0
        K = s0.size
        owner = np.repeat(np.arange(K), n)
        last = np.cumsum(n) - 1                     # each request's last knot
        firsts = last - n + 1
        j = np.arange(owner.size) - firsts[owner]   # each knot's index in its request
        tau = j * (dur / (n - 1))[owner]
        tau[last] = dur
        advanced, rate, rate_dot = _ramp_at(tau, dur[owner], f0, f1[owner])
        stops = f1 == 0.0
        # the check times of each goal, as peak_use takes them (every CHECK_SPACING_S, and
        # each knot from both sides, the one before the first knot dropped), request by request
        m = _arange_sizes(dur, CHECK_SPACING_S)
        g_owner = np.repeat(np.arange(K), m)
        grid = (np.arange(g_owner.size) - np.repeat(np.cumsum(m) - m, m)) * CHECK_SPACING_S
        x = np.concatenate([grid, tau - 1e-9, np.minimum(tau + 1e-9, dur[owner])])
        x_owner = np.concatenate([g_owner, owner, owner])
        order = np.argsort(x_owner, kind="stable")   # request by request, blocks in order
        x, x_owner = x[order], x_owner[order]
        keep = x >= 0.0
        ts, x_owner = x[keep], x_owner[keep]
        # each time's segment: the last knot at or before it (np.searchsorted(t, x, "right")
        # - 1 in its own request's knots), from the knots' spacing and then settled by
        # comparing with the knots themselves, so exactly as searchsorted finds it
        top = n[x_owner] - 1
        step = (dur / (n - 1))[x_owner]
        seg = np.minimum(np.floor(ts / step).astype(np.int64), top)
        base = firsts[x_owner]
        while True:
            up = (seg < top) & (tau[base + np.minimum(seg + 1, top)] <= ts)
            down = (seg > 0) & (tau[base + seg] > ts)
            if not (up.any() or down.any()):
                break
            seg = seg + up - down
        np.minimum(np.maximum(seg, 0, out=seg), top - 1, out=seg)
        rows = base - x_owner + seg                 # segments: n - 1 per request
        t0, t1 = tau[base + seg], tau[base + seg + 1]
        beyond = ts > dur[x_owner]
        counts = np.bincount(x_owner, minlength=K)
        starts = np.cumsum(counts) - counts
        xs = (np.minimum(np.maximum(ts, t0), t1) - t0)[..., None]
        inner = np.ones(tau.size, dtype=bool)
        inner[last] = False                         # a segment starts at every knot but the last
        worst = np.zeros(s0.size)
        for arm, traj in self.plan.arms.items():
            p, v, a = sample(traj, s0[owner] + advanced)
            vel = v * rate[:, None]
            acc = a * (rate**2)[:, None] + v * rate_dot[:, None] \
                if traj.accelerations is not None else np.zeros_like(p)
            vel[last[stops]] = 0.0
            acc[last[stops]] = 0.0
            kind = interpolation_of(traj)
            i0 = np.flatnonzero(inner)
            c = segment_coefficients(p[i0], vel[i0], acc[i0], p[i0 + 1], vel[i0 + 1],
                                     acc[i0 + 1], tau[i0 + 1] - tau[i0], kind)
            J = p.shape[1]
            b = self.bounds[arm]
            if self.kernel is not None and J:
                peaks = np.empty((2, s0.size))
                self.kernel.goal_peaks(
                    np.ascontiguousarray(_with_derivatives(np.moveaxis(c, 0, 1))),
                    rows.astype(np.int64), np.ascontiguousarray(xs[:, 0]),
                    beyond.astype(np.uint8), np.ascontiguousarray(b.velocity, dtype=float),
                    np.ascontiguousarray(b.acceleration, dtype=float), starts.astype(np.int64),
                    peaks[0], peaks[1])
                for m in peaks:   # velocity, then acceleration, as below
                    worst = np.where(m > worst, m, worst)
                continue
            d = _with_derivatives(np.moveaxis(c, 0, 1))[rows]
            r = d[..., 5, :]
            for k in (4, 3, 2, 1, 0):
                r = d[..., k, :] + xs * r
            gv, ga = r[..., J:2 * J], r[..., 2 * J:]
            gv[beyond] = 0.0
            ga[beyond] = 0.0
            for values, limit in ((gv, b.velocity), (ga, b.acceleration)):
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(np.isfinite(limit), np.abs(values) / limit, 0.0)
                if ratio.shape[1]:
                    m = np.maximum.reduceat(ratio, starts, axis=0).max(axis=1)
                    worst = np.where(m > worst, m, worst)
        return worst
