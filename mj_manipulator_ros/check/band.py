"""The stop band: every configuration in which two arms are at plan times t1, t2 with
|t1 - t2| <= skew.

When one arm fails, every peer stops where it is, at a plan time that differs from the failed
arm's by its stop latency; an arm that lags its peer does the same. Those pairs of
configurations are not on the synchronized replay's diagonal. Arm-arm contacts are pairwise, so
pairs of arms suffice: for each pair (A, B) the band {(t, t + d): t in [0, D], |d| <= skew}
(plan times clamped to [0, D]: an arm before its start or after its end holds) is sampled on the
plan's grid in t and a grid in d, and certified between samples like the other modes: on a cell
[ta, tb] x [da, db] every point lies within (tb - ta)/2 of a corner in A's time and within
(tb - ta + db - da)/2 in B's, so the cell is clear when its smallest corner clearance minus the
travel of A and of B over those half-widths (the kinematic-tree bound of ``model/reach.py``, at
the speed bound of each arm's span) is at least the margin. The grid in d is coarse first
(cells of ``COARSE_STEP_S`` at most, symmetric about d = 0, whose states are the synchronized
replay's) and halved cell by cell where a cell is not certified, down to ``delta_step``; a cell
not certified there is split in four, down to ``max_depth``. A cell not certified then counts
against the plan. Most of a plan's band is far from any contact and certifies coarse: the
crossing plan's band (0.651 s) takes 8,297 states (1,401 of them the synchronized replay's)
where sampling every 0.05 s of d took 39,228.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Mapping, Optional

import numpy as np

from mj_manipulator_ros.check.checked_state import CheckedState
from mj_manipulator_ros.check.timeline import PlanMotion, synchronized_motion
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import MultiArmPlan

#: the finest step of the skew grid, s: a cell of the grid not certified at this width is split
#: in four (in plan time and skew), down to the checker's ``max_depth``
DELTA_STEP_S = 0.05
#: the first step of the skew grid, s (cells symmetric about d = 0: the synchronized replay's
#: states are corners): the grid is refined by halves in skew, cell by cell, only where a cell
#: is not certified (most of a plan's band is far from any contact). 0.8 s: the OpenArm pair's
#: crossing plan (band 0.651 s) checks 8,297 states, 9,435 at 0.4 s, 13,202 at 0.2 s
COARSE_STEP_S = 0.8


def check_band(checker, plan: MultiArmPlan, skew: float, delta_step: float = DELTA_STEP_S,
               coarse_step: float = COARSE_STEP_S,
               diagonal: Optional[Mapping[int, np.ndarray]] = None):
    """The band replay of ``plan`` on ``checker`` (a PlanReplayChecker, continuous model).

    Each pair's band is sampled on the plan's own grid in t; in d, first every ``coarse_step``
    (at most; the cells symmetric about d = 0), then halved cell by cell where a cell is not
    certified, until the cells are at most ``delta_step`` wide; a cell not certified then is
    split in four as before. Every cell ends certified, colliding at a sampled state, or
    counted uncertified: the same certificate as sampling the whole band at ``delta_step``,
    from fewer states.

    ``diagonal``: pair code -> the clearance (T,) of its states at d = 0 (capped at the
    horizon), from the synchronized replay of the same plan on the same checker (the same
    poses and geoms: the same figures), where it found no contact under the margin and no
    full contact buffer; those states are taken from it instead of evaluated again.

    Returns:
        A ReplayReport with mode ``band``, ``skew``, and ``band_collision`` (the first colliding
        pair of plan times, or None).
    """
    if not (np.isfinite(skew) and skew >= 0):
        raise ValueError(f"skew must be a finite number of seconds >= 0, got {skew!r}")
    if not (delta_step > 0 and coarse_step >= delta_step):
        raise ValueError(f"the skew grid needs 0 < delta_step <= coarse_step, got {delta_step!r} "
                         f"and {coarse_step!r}")
    arms = checker.arm_names
    missing = [a for a in arms if a not in plan.arms]
    if missing:
        raise ValueError(f"the plan has no trajectory for arm(s) {missing}")
    duration = plan.duration
    times = np.asarray(plan[arms[0]].times, dtype=float)
    n_t = times.size
    motion = synchronized_motion(plan)   # the synchronized replay's, where it ran first
    base = {a: sample(plan[a], times)[0] for a in arms}
    table = {a: _RangeMax(times, motion, a) for a in arms}
    codes = _pair_codes(arms)
    codes_of = {pair: code for code, pair in codes.items()}
    cache: dict = {}
    grids: dict = {}   # (a, b) -> ({skew: index}, clearance (T, F + 1), evaluated)
    time_index = {round(float(t), 12): it for it, t in enumerate(times)}

    def evaluate(a: str, b: str, t: float, d: float):
        """The state at (t, t + d) of pair (a, b) and whether it was evaluated just now (not a
        state of the grid or of an earlier split)."""
        key = (a, b, round(t, 12), round(d, 12))
        if key in cache:
            return cache[key], False
        d_index, clear_table, done = grids[(a, b)]
        it, jd = time_index.get(key[2]), d_index.get(key[3])
        if it is not None and jd is not None and done[it, jd]:   # a grid state: known
            found = states_at[(a, b)][(it, jd)]
            cache[key] = found if found.hits or found.overflow else \
                CheckedState(clearance={codes_of[(a, b)]: clear_table[it, jd]})
            return cache[key], False
        poses = {x: sample(plan[x], [min(max(t, 0.0), duration)])[0][0] for x in arms}
        poses[b] = sample(plan[b], [min(max(t + d, 0.0), duration)])[0][0]
        cache[key] = checker._evaluate(poses)
        return cache[key], True

    def travel(arm: str, ta, tb, half) -> np.ndarray:
        """Travel bound (m) of ``arm``'s geoms over half-widths ``half`` at its speed bound on
        [ta, tb] (arrays of cells)."""
        speed = table[arm].query(np.clip(ta, 0.0, duration), np.clip(tb, 0.0, duration))  # (C, J)
        return np.max(checker._rho[arm] @ (speed * np.asarray(half)[:, None]).T, axis=0)

    states, state_times, state_clear, between = [], [], [], []
    states_at: dict = {}   # (a, b) -> {(time index, skew index): state}
    uncertified = extra = 0
    first = None
    still = {a for a in arms if not table[a].levels[0].any()}   # no joint moves: a constant
    for a, b in itertools.combinations(arms, 2):  # d in [-skew, skew] covers both orders
        code = codes_of[(a, b)]
        # beside an arm that holds one pose all along, every (t, t + d) is a state of the
        # synchronized replay: the band of that pair is its diagonal
        if skew == 0 or a in still or b in still:
            deltas, cells_d = np.zeros(1), np.zeros((1, 2), dtype=np.int64)
        else:
            coarse = 2 * max(1, int(np.ceil(skew / coarse_step)))   # even: d = 0 a corner
            halvings = max(0, int(np.ceil(np.log2(2 * skew / (coarse * delta_step)))))
            n_fine = coarse << halvings   # the finest cells, each at most delta_step wide
            deltas = np.linspace(-skew, skew, n_fine + 1)
            deltas[n_fine // 2] = 0.0
            cells_d = np.column_stack([np.arange(coarse), np.arange(1, coarse + 1)]) << halvings
        clear = np.full((n_t, deltas.size), np.inf)
        hit = np.zeros((n_t, deltas.size), dtype=bool)
        done = np.zeros((n_t, deltas.size), dtype=bool)
        grids[(a, b)] = ({round(float(d), 12): j for j, d in enumerate(deltas)}, clear, done)
        here = states_at[(a, b)] = {}
        known = None if diagonal is None else diagonal.get(code)
        if known is not None:   # the synchronized replay's states of this pair, clear
            known = np.minimum(np.asarray(known, dtype=float), checker.horizon)
            if known.shape != (n_t,) or (known < checker.margin).any():
                raise ValueError(f"the diagonal of pair {a}-{b} must be the clearance of the "
                                 f"synchronized replay's {n_t} states, every one clear of the "
                                 f"margin; got shape {known.shape}")
            j0 = deltas.size // 2
            clear[:, j0], done[:, j0] = known, True
            clean = CheckedState()
            here.update(((it, j0), clean) for it in range(n_t))
            states.extend([clean] * n_t)
            state_times.extend(times.tolist())
            state_clear.append((code, known.copy()))
        # the cells: [t_i, t_i+1] x [d_lo, d_hi] by indices, every time interval at once
        it = np.repeat(np.arange(max(n_t - 1, 1)), cells_d.shape[0])
        lo, hi = np.tile(cells_d[:, 0], max(n_t - 1, 1)), np.tile(cells_d[:, 1], max(n_t - 1, 1))
        stack = []
        while it.size:
            i1 = np.minimum(it + 1, n_t - 1)
            # the corners not evaluated yet, in one batch (rows: skew-major, as listed)
            ti = np.concatenate([it, it, i1, i1])
            di = np.concatenate([lo, hi, lo, hi])
            new = np.unique(di * n_t + ti)
            new = new[~done[new % n_t, new // n_t]]
            nt, nd = new % n_t, new // n_t
            if new.size:
                poses = {x: base[x][nt] for x in arms}
                poses[b] = sample(plan[b], np.clip(times[nt] + deltas[nd], 0.0, duration))[0]
                batch, table_all = checker._states(checker._qpos(poses), codes)
                clear[nt, nd] = np.minimum(table_all[:, code], checker.horizon)
                hit[nt, nd] = table_all[:, code] < checker.margin
                done[nt, nd] = True
                here.update(zip(zip(nt.tolist(), nd.tolist()), batch))
                states.extend(batch)
                state_times.extend(times[nt].tolist())
                state_clear.append((code, clear[nt, nd]))
            # certify every cell at once; refine only those that fail
            ta, tb, da, db = times[it], times[i1], deltas[lo], deltas[hi]
            corner_clear = np.minimum.reduce([clear[it, lo], clear[it, hi], clear[i1, lo],
                                              clear[i1, hi]])
            corner_hit = hit[it, lo] | hit[it, hi] | hit[i1, lo] | hit[i1, hi]
            bound = (travel(a, ta, tb, (tb - ta) / 2)
                     + travel(b, ta + da, tb + db, (tb - ta + db - da) / 2))
            fail = ~corner_hit & (corner_clear - bound < checker.margin)
            wide = fail & (hi - lo > 1)
            narrow = np.flatnonzero(fail & (hi - lo <= 1))
            stack.extend((float(ta[c]), float(tb[c]), float(da[c]), float(db[c]), 1)
                         for c in narrow)
            mid = (lo[wide] + hi[wide]) // 2
            it = np.concatenate([it[wide], it[wide]])
            lo, hi = np.concatenate([lo[wide], mid]), np.concatenate([mid, hi[wide]])
        hits = np.argwhere(hit & done)   # (time index, skew index), time-major
        if first is None and hits.size:
            k = int(np.lexsort((np.abs(deltas[hits[:, 1]]), times[hits[:, 0]]))[0])
            t, d = float(times[hits[k, 0]]), float(deltas[hits[k, 1]])
            first = (a, b, t, float(min(max(t + d, 0.0), duration)))
        if stack and checker.max_depth == 0:
            uncertified += len(stack)
            stack = []
        while stack:
            ta_, tb_, da_, db_, depth = stack.pop()
            tm, dm = (ta_ + tb_) / 2, (da_ + db_) / 2
            new = [(tm, dm), (tm, da_), (tm, db_), (ta_, dm), (tb_, dm)] if db_ > da_ else [(tm, da_)]
            found = False
            for t, d in new:
                s, fresh = evaluate(a, b, t, d)
                extra += fresh
                if fresh and _hit(s, code):
                    between.append((t, s))
                    found = True
                    if first is None:
                        first = (a, b, t, min(max(t + d, 0.0), duration))
            if found:
                continue  # a collision inside the cell: reported, no need to split further
            halves = ([(ta_, tm, da_, dm), (tm, tb_, da_, dm), (ta_, tm, dm, db_), (tm, tb_, dm, db_)]
                      if db_ > da_ else [(ta_, tm, da_, db_), (tm, tb_, da_, db_)])
            for c_ta, c_tb, c_da, c_db in halves:
                cs = [evaluate(a, b, t, d)[0] for t, d in ((c_ta, c_da), (c_ta, c_db), (c_tb, c_da),
                                                        (c_tb, c_db))]
                worst = min(_clear(c, code, checker) for c in cs)
                bound = float(travel(a, np.array([c_ta]), np.array([c_tb]), [(c_tb - c_ta) / 2])[0]
                              + travel(b, np.array([c_ta + c_da]), np.array([c_tb + c_db]),
                                       [(c_tb - c_ta + c_db - c_da) / 2])[0])
                if worst - bound >= checker.margin:
                    continue
                if depth >= checker.max_depth:
                    uncertified += 1
                    continue
                stack.append((c_ta, c_tb, c_da, c_db, depth + 1))
    for s in states + [x for _, x in between]:  # other categories are not the band's business
        s.hits = [h for h in s.hits if h[0] in codes]
    # each pair's own column over its states, the horizon over the other pairs' (list order)
    clearance = {c: np.concatenate([v if cc == c else np.full(v.size, checker.horizon)
                                    for cc, v in state_clear])
                 for c in codes}
    report = checker._report("band", np.array(state_times), states, clearance, between,
                             uncertified, extra, True)
    scope = dict(report.scope or {}, checked=["arm-arm"])  # an arm's own pairs: synchronized
    return replace(report, skew=float(skew), scope=scope, band_collision=None if first is None else {
        "arms": [first[0], first[1]], "t1": first[2], "t2": first[3]})


class _RangeMax:
    """Upper bounds of an arm's |joint velocity| over any [ta, tb] inside the plan, per joint:
    the max over the plan intervals it touches of PlanMotion's bound for each interval (a sparse
    table: O(1) per query, vectorized over queries)."""

    def __init__(self, times: np.ndarray, motion: PlanMotion, arm: str) -> None:
        self.times = times
        base = motion.speed_bounds(times[:-1], times[1:])[arm] if times.size > 1 \
            else np.zeros((1, 0))
        self.levels = [base]
        while 2 ** len(self.levels) <= base.shape[0]:
            prev, half = self.levels[-1], 2 ** (len(self.levels) - 1)
            self.levels.append(np.maximum(prev[:-half], prev[half:]))

    def query(self, ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
        n = self.levels[0].shape[0]
        lo = np.clip(np.searchsorted(self.times, ta, side="right") - 1, 0, n - 1)
        hi = np.clip(np.searchsorted(self.times, tb, side="left") - 1, lo, n - 1)  # inclusive
        span = hi - lo + 1
        level = np.floor(np.log2(span)).astype(int)
        out = np.empty((lo.size, self.levels[0].shape[1]))
        for lv in np.unique(level):
            m = level == lv
            table = self.levels[lv]
            out[m] = np.maximum(table[lo[m]], table[hi[m] - 2 ** lv + 1])
        return out


def _pair_codes(arms: list[str]) -> dict[int, tuple[str, str]]:
    """Category code -> (a, b) of every pair of arms, in replay order (the checker's codes)."""
    n = len(arms)
    return {min(i, k) * (n + 1) + max(i, k): (a, b)
            for (i, a), (k, b) in itertools.combinations(enumerate(arms), 2)}


def _clear(state, code: int, checker) -> float:
    return min(state.clearance.get(code, checker.horizon), checker.horizon)


def _hit(state, code: int) -> bool:
    return any(h[0] == code for h in state.hits)
