"""Fitting a plan to its stop limits: slowed only where a stop would pass them, or refused by
name (``execution.max_stop_time_s``, ``execution.max_stop_distance_m``; per arm under
``arms[]``).

Where a predicted stop (``check/stop_envelope.py``) passes a limit, :func:`fit_stop_limits`
slows the plan there (one time scaling of every arm, ``core/retime.py``: the paths and the
synchronization kept), checks the slowed plan again (validation and every stop), and returns it
with where and how much it was slowed; when no speed down to ``execution.min_speed_factor``
fits, it refuses by arm, plan time and figure. The speeds first tried come from the stops
predicted at full and at half speed, aimed at ``FIT_MARGIN`` of the limits
(:func:`_speeds_needed`); the slowed plan's own stops decide, and where one still passes, the
next round slows it there one step more.

Shapes: K request times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from mj_manipulator_ros.check.stop_envelope import (EVERY_S, Envelope, HandPaths, StopExcess,
                                                    has_limits, predict)
from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ExecutionRefusedError, PlanError
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.retime import limit_slope, retimed, time_map
from mj_manipulator_ros.core.validation import validate_plan

#: speeds tried where the plan must be slowed, finest step (a speed is a multiple of it)
SPEED_STEP = 0.05
#: the slowed profile's largest slope, per s of plan time, first tried (halved while the
#: slowed plan passes a joint's limits), and the smallest tried
SLOPE, MIN_SLOPE = 1.0, 0.05
#: the speeds first tried are those estimated to stop within this fraction of the limits: the
#: slowed plan's changes of speed lengthen some stops, and each round costs a prediction of
#: every stop of the slowed plan. With each speed held a lead after its request too
#: (:func:`_slowed`), the crossing plan at 0.5 s / 100 mm: 0.95 -> 1 round, 19.82 s of plan;
#: 1.0 -> 2 rounds, 18.38 s; 0.9 -> 1 round, 21.93 s (one lead before only, as first built:
#: 0.9 -> 2 rounds, 20.55 s)
FIT_MARGIN = 0.95
#: rounds of slowing the plan where the slowed plan's own stops still pass a limit
FIT_ROUNDS = 6


class StopLimitError(ExecutionRefusedError):
    """No speed fits a stop limit somewhere in the plan: nothing was sent."""


@dataclass(frozen=True)
class StopFit:
    """A plan within its stop limits: the plan to run, and how it was slowed.

    Attributes:
        plan: the plan as it will run (the one given when nothing was slowed).
        slowed: (from, to, lowest speed) per slowed stretch, in the original's plan time (s).
        plan_times: (K,) the original's plan time at each of ``plan``'s waypoints (s); None
            when nothing was slowed.
        duration_before, duration_after: s.
        worst_before, worst_after: :meth:`Envelope.worst` of the plan given and of ``plan``.
    """

    plan: MultiArmPlan
    slowed: tuple = ()
    plan_times: Optional[np.ndarray] = None
    duration_before: float = 0.0
    duration_after: float = 0.0
    worst_before: Optional[dict] = None
    worst_after: Optional[dict] = None

    def summary(self) -> str:
        if not self.slowed:
            return "every stop within its limits at full speed"
        where = ", ".join(f"{a:.2f}-{b:.2f} s at {f:.2f}" for a, b, f in self.slowed)
        return (f"slowed for the stop limits: plan time {where}; {self.duration_before:.2f} s -> "
                f"{self.duration_after:.2f} s; longest stop {self.worst_before['stop_time_s']:.3f}"
                f" -> {self.worst_after['stop_time_s']:.3f} s")


def fit_stop_limits(plan: MultiArmPlan, config: ExecutorConfig, scene) -> StopFit:
    """``plan``, slowed where a stop would pass a limit (module docstring).

    Raises:
        StopLimitError: no speed down to ``execution.min_speed_factor`` fits (the message
            names the arm, the plan time and the figure), or the slowed plan cannot keep the
            joints' limits.
    """
    if not has_limits(config, plan.arm_names):
        return StopFit(plan, duration_before=plan.duration, duration_after=plan.duration)
    paths = HandPaths(plan, scene)
    full = predict(plan, config, paths)
    if full.fits(config).all():
        w = full.worst()
        return StopFit(plan, (), None, plan.duration, plan.duration, w, w)
    need = _speeds_needed(plan, config, paths, full)
    requests = full.request
    for _round in range(FIT_ROUNDS):
        (slowed, plan_times), mapping, profile = _slowed(plan, config, requests, need)
        env = predict(slowed, config, paths, original=mapping)
        bad = ~env.fits(config)
        if not bad.any():
            return StopFit(slowed, _stretches(*profile), plan_times, plan.duration,
                           slowed.duration, full.worst(), env.worst())
        # where the slowed plan's own stops still pass: one step slower there (and at the
        # requests beside it), in the original's plan time
        at = np.interp(env.request[bad], mapping[0], mapping[1])
        ks = np.unique(np.clip(np.searchsorted(requests, at, side="right") - 1, 0,
                               need.size - 1))
        lowest = config.execution.min_speed_factor
        if np.all(need[ks] <= lowest + 1e-9):
            raise StopLimitError(_refusal(env.excesses(config)[0], config, slowed=True))
        lowered = need.copy()
        for k in ks:
            lower = max(need[k] - SPEED_STEP, lowest)
            lowered[max(0, k - 1):k + 2] = np.minimum(lowered[max(0, k - 1):k + 2], lower)
        need = lowered
    raise StopLimitError(_refusal(env.excesses(config)[0], config, slowed=True))


def _speeds_needed(plan: MultiArmPlan, config: ExecutorConfig, paths: HandPaths,
                   full: Envelope) -> np.ndarray:
    """(K,) per request, a first guess of the highest speed (a multiple of SPEED_STEP, or the
    lowest allowed) at which every stop from there fits within ``FIT_MARGIN`` of the limits,
    estimated: at speed f a stop's lead and a hold's run-on cover f times the plan time, its
    ramp lasts a f + b f^2 (through the ramps predicted at full and at half speed: a ramp bound
    by a joint's acceleration lasts f times as long, one bound by the plan's own acceleration
    longer) and covers half that times f of plan time. The slowed plan's own stops are then
    predicted (:func:`fit_stop_limits`): the guess only saves rounds; where it is short, the
    rounds slow the plan further.

    Raises:
        StopLimitError: a hold's time is over a limit (no speed shortens it), or a stop from some
            request does not fit even with the plan at the lowest speed allowed throughout
            (predicted, not estimated)."""
    s = config.execution
    lowest = s.min_speed_factor
    hold = [e for e in full.excesses(config) if e.kind == "hold" and e.figure == "time"]
    if hold:   # a hold's run-on lasts as long at any speed
        raise StopLimitError(_refusal(hold[0], config, slowed=False))
    r = full.request
    lead = s.start_lead_s
    moving = r + lead < plan.duration   # the plan's end not within the lead
    h = max(0.5, lowest)
    todo = np.flatnonzero(~full.fits(config, FIT_MARGIN))
    settle = s.stop_settle_s
    ramp1 = full.controlled_time - lead - settle
    ramph = np.full(r.size, np.nan)
    if todo.size:
        half = predict(plan, config, paths, speed=h, requests=r[todo])
        ramph[todo] = half.controlled_time - lead - settle
    b = (ramph - h * ramp1) / (h * h - h)   # ramp(f) = (ramp1 - b) f + b f^2
    a = ramp1 - b
    need = np.where(full.fits(config, FIT_MARGIN), 1.0, np.nan)
    speeds = list(np.arange(1.0 - SPEED_STEP, lowest - 1e-9, -SPEED_STEP))
    if not speeds or speeds[-1] > lowest + 1e-9:
        speeds.append(lowest)
    for f in speeds:
        ok = np.isnan(need)
        ramp = np.maximum(a * f + b * f * f, 0.0)
        # where no stop was found at full speed, the one at half speed stands below it
        ramp = np.where(np.isnan(ramp) & (f <= h), ramph * f / h, ramp)
        controlled = ~np.isnan(ramp)
        for arm in plan.arm_names:
            t_max, d_max = config.stop_limits(arm)
            if t_max is not None:
                time_f = np.where(controlled, lead + ramp + settle, s.hold_settle_s)
                ok &= ~moving | (time_f <= FIT_MARGIN * t_max)
            if d_max is not None:
                to = r + lead * f + 0.5 * f * np.nan_to_num(ramp)
                lagging = np.maximum(r - s.tracking_lag_s * f, 0.0)
                travel = np.where(controlled, paths.between(
                    arm, lagging, np.minimum(to, plan.duration)), 0.0)
                held = paths.between(arm, lagging, r + s.hold_overshoot_s * f) + \
                    paths.between(arm, r, r + s.hold_overshoot_s * f)
                ok &= np.maximum(travel, held) + s.stop_overtravel_m <= FIT_MARGIN * d_max
        need[ok] = float(f)
    left = np.flatnonzero(np.isnan(need))
    if left.size:   # not even the lowest speed, estimated: predicted there
        slowest = predict(plan, config, paths, speed=lowest, requests=r[left])
        bad = slowest.excesses(config)
        if bad:
            raise StopLimitError(_refusal(bad[0], config, slowed=False))
        need[left] = lowest
    return need


def _slowed(plan: MultiArmPlan, config: ExecutorConfig, requests: np.ndarray,
            need: np.ndarray) -> tuple[tuple, tuple, tuple]:
    """The plan at the speeds ``need`` (one per request, held from one start lead before it to
    one lead after it: a stop asked there keeps the plan for a lead, then ramps from the speed
    it finds), smoothed to a slope the joints' limits allow. Returns it with the
    original's plan time at each of its waypoints, its plan time map (slowed plan times,
    original plan times) and its speed profile (original plan times, speeds).

    Raises:
        StopLimitError: even the gentlest slope passes a joint's limit."""
    lead = config.execution.start_lead_s
    grid = np.linspace(0.0, plan.duration, max(2, int(np.ceil(plan.duration / 0.01)) + 1))
    k = np.clip(np.searchsorted(requests, grid, side="right") - 1, 0, need.size - 1)
    g = need[k].copy()
    # a request at s runs at its speed from a lead before s to a lead after it
    ahead = np.clip(np.searchsorted(requests, grid + lead + EVERY_S, side="right") - 1, 0,
                    need.size - 1)
    behind = np.clip(np.searchsorted(requests, grid - lead - EVERY_S, side="left"), 0,
                     need.size - 1)
    for j in range(g.size):
        g[j] = min(g[j], float(need[min(k[j], behind[j]):ahead[j] + 1].min()))
    slope = SLOPE
    while True:
        profile = limit_slope(grid, g, slope)
        slowed = retimed(plan, grid, profile)
        try:
            validate_plan(slowed[0], config)
            fine_s, _fine_g, t_of_s = time_map(plan.duration, grid, profile)
            return slowed, (t_of_s, fine_s), (grid, profile)
        except PlanError as exc:
            if slope / 2 < MIN_SLOPE:
                raise StopLimitError(
                    f"the plan slowed for the stop limits passes a joint's limits even with the "
                    f"gentlest change of speed ({MIN_SLOPE:g} per s of plan time): {exc}; "
                    "nothing was sent") from None
            slope /= 2


def _stretches(grid: np.ndarray, profile: np.ndarray) -> tuple:
    """(from, to, lowest speed) for each stretch of plan time the profile runs below 1."""
    slow = profile < 1.0 - 1e-9
    out, k = [], 0
    while k < slow.size:
        if not slow[k]:
            k += 1
            continue
        j = k
        while j + 1 < slow.size and slow[j + 1]:
            j += 1
        out.append((float(grid[k]), float(grid[min(j + 1, slow.size - 1)]),
                    float(profile[k:j + 1].min())))
        k = j + 1
    return tuple(out)


def _refusal(excess: StopExcess, config: ExecutorConfig, slowed: bool) -> str:
    how = ("even slowed there" if slowed else
           f"even at the lowest speed allowed (execution.min_speed_factor "
           f"{config.execution.min_speed_factor:g})")
    return (f"stop limits: no speed fits: {excess.text()} {how}; nothing was sent")
