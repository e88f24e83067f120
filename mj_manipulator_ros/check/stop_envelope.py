"""Stop envelopes: no plan runs where a stop could take longer, or carry an arm's hand further,
than the cell allows (``execution.max_stop_time_s``, ``execution.max_stop_distance_m``; per arm
under ``arms[]`` with the same names; unset: no limit).

For a request every ``EVERY_S`` of plan time, each arm's stop is predicted from the plan itself
and four measured allowances for the arm's own response (``execution.stop_settle_s``,
``hold_settle_s``, ``tracking_lag_s``, ``stop_overtravel_m``: the stops measured in the simulator per controller kind,
``bench/measured_stops.py``; on the robot, HIL stage 3):

- **controlled** (a stop, an unresumed pause, every arm's peers when one fails): the arms keep
  the plan for one start lead, then ramp to rest along it, as the executor computes the ramp
  (``core/stop_ends.py``): stop time = lead + ramp + ``stop_settle_s`` (the arm catching up with
  its reference after the reference stands); the hand's path length from ``tracking_lag_s`` of
  plan time before the request (where the arm, lagging its reference, is) to the rest, plus
  ``stop_overtravel_m`` (past the rest and back). Where no
  controlled stop exists within the limits the executor cancels instead: the hold stands for it
  there.
- **hold** (a failed arm, or every arm canceled): the controller holds where the cancel finds
  it and the arm comes to rest within ``execution.hold_overshoot_s`` of its run-on (measured at
  full speed by ``check-plan --stops --hold`` and by HIL stage 3; taken as the run-on's
  duration: at speed f the arm covers f times that much plan time): stop time =
  ``hold_settle_s``; the hand's path length from the lag before the request to that run-on and
  the run-on back (a servo holding where the cancel found it pulls the arm back there), plus
  ``stop_overtravel_m``.

Where a stop would pass a limit, ``check/stop_fit.py`` slows the plan there.

Shapes: K request times; M grid samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from mj_manipulator_ros.check.stop_distances import SPACING_S, cumulative_paths, path_between
from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.stop_ends import stop_ends
from mj_manipulator_ros.core.time_scaling import config_bounds

#: plan-time spacing of the requests each stop is predicted for, s
EVERY_S = 0.05
@dataclass(frozen=True)
class StopExcess:
    """A predicted stop over its limit."""

    arm: str
    kind: str          # "controlled" or "hold"
    figure: str        # "time" or "distance"
    plan_time: float   # the request's plan time, s
    value: float       # s or m
    limit: float       # s or m

    def text(self) -> str:
        unit, what = ("s", "takes") if self.figure == "time" else ("m", "carries its hand")
        setting = "max_stop_time_s" if self.figure == "time" else "max_stop_distance_m"
        return (f"arm {self.arm!r}: a {self.kind} stop asked at plan time {self.plan_time:.2f} s "
                f"{what} {self.value:.3f} {unit}, over its limit {self.limit:g} {unit} "
                f"(arms[].{setting} or execution.{setting})")


@dataclass(frozen=True)
class Envelope:
    """The stops of a plan at ``speed``, from every request time.

    Attributes:
        request (K,): plan times, s.
        controlled_time (K,): request to rest, s; NaN where no controlled stop exists (the hold
            stands for it).
        controlled_travel: per arm (K,): the hand's path length, m.
        rest (K,): the original's plan time where a controlled stop stands (NaN: none).
        hold_time: a hold's stop time, s.
        hold_travel: per arm (K,): the hand's path over a hold's run-on, m.
        hand: per arm, the body counted as its hand.
    """

    request: np.ndarray
    speed: float
    controlled_time: np.ndarray
    controlled_travel: Mapping[str, np.ndarray]
    rest: np.ndarray
    hold_time: float
    hold_travel: Mapping[str, np.ndarray]
    hand: Mapping[str, str]
    #: the requests are the plan's whole grid (every ``EVERY_S``): each figure is bounded
    #: between samples too (:func:`between_samples`); False for a chosen few (the samples alone)
    whole: bool = True

    def excesses(self, config: ExecutorConfig, margin: float = 1.0) -> list[StopExcess]:
        """Every predicted stop over its arm's limit (times ``margin``), in plan-time order."""
        out = []
        for arm in self.controlled_travel:
            t_max, d_max = config.stop_limits(arm)
            none = np.isnan(self.controlled_time)
            figures = [("controlled", "time", np.where(none, self.hold_time,
                                                       self.controlled_time), t_max),
                       ("controlled", "distance", np.where(none, self.hold_travel[arm],
                                                           self.controlled_travel[arm]), d_max),
                       ("hold", "time", np.full(self.request.size, self.hold_time), t_max),
                       ("hold", "distance", self.hold_travel[arm], d_max)]
            for kind, figure, values, limit in figures:
                if limit is None:
                    continue
                limit = limit * margin
                values = between_samples(values) if self.whole else values
                for k in np.flatnonzero(values > limit + 1e-12):
                    out.append(StopExcess(arm, kind, figure, float(self.request[k]),
                                          float(values[k]), float(limit)))
        return sorted(out, key=lambda e: (e.plan_time, e.arm, e.kind, e.figure))

    def fits(self, config: ExecutorConfig, margin: float = 1.0) -> np.ndarray:
        """(K,) bool: every arm's every stop from that request within its limits (times
        ``margin``)."""
        ok = np.ones(self.request.size, dtype=bool)
        for e in self.excesses(config, margin):
            ok[np.searchsorted(self.request, e.plan_time)] = False
        return ok

    def worst(self) -> dict:
        """The longest stop (s) and each arm's farthest hand travel (m), over every request."""
        times = np.where(np.isnan(self.controlled_time), self.hold_time, self.controlled_time)
        out = {"stop_time_s": float(max(times.max(initial=0.0), self.hold_time))}
        for arm, travel in self.controlled_travel.items():
            out[f"{arm}_hand_travel_m"] = float(max(np.nanmax(travel, initial=0.0),
                                                    self.hold_travel[arm].max(initial=0.0)))
        return out


def between_samples(values: np.ndarray) -> np.ndarray:
    """(K,) per request, a bound on the figure from the request halfway to each neighbour:
    the larger of the two samples plus an eighth of the largest second difference around them
    (for a smooth figure the most it rises between two samples, Taylor to the second order).
    The stops are predicted every ``EVERY_S`` of plan time; a request between two of them is
    covered by this bound (checked against the stops computed one by one on an offset grid:
    ``test/test_stop_envelope.py``)."""
    v = np.asarray(values, dtype=float)
    if v.size < 3:
        return v
    d2 = np.abs(np.diff(v, 2))
    curv = np.concatenate([[d2[0]], d2, [d2[-1]]])          # (K,) at each sample
    pair = np.maximum(v[:-1], v[1:]) + np.maximum(curv[:-1], curv[1:]) / 8.0   # (K-1,)
    out = v.copy()
    out[:-1] = np.maximum(out[:-1], pair)
    out[1:] = np.maximum(out[1:], pair)
    return out


class HandPaths:
    """The arms' hands' cumulative path lengths along a plan (computed once; a slowed plan
    has the same paths, read through its plan-time map)."""

    def __init__(self, plan: MultiArmPlan, scene) -> None:
        self.grid = np.arange(0.0, plan.duration + SPACING_S / 2, SPACING_S)
        _joints, cum, self.hand = cumulative_paths(plan, scene, self.grid)
        self.cum = {a: c[:, None] for a, c in cum.items()}

    def between(self, arm: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(K,) path length of ``arm``'s hand from original plan times ``a`` to ``b``."""
        return path_between(self.cum[arm], self.grid, a, b)[:, 0]


def predict(plan: MultiArmPlan, config: ExecutorConfig, paths: HandPaths, speed: float = 1.0,
            every: float = EVERY_S, original=None, requests=None) -> Envelope:
    """The stops of ``plan`` at ``speed`` (module docstring), asked every ``every`` s of plan
    time (or at ``requests``, s). ``paths``: the hands' paths of the original plan;
    ``original``: (plan times of ``plan``, the original's plan times there), increasing, when
    ``plan`` is a slowed copy (None: ``plan`` is the original)."""
    s = config.execution
    duration = plan.duration
    whole = requests is None
    requests = np.arange(0.0, duration, every) if whole else np.asarray(requests, dtype=float)
    lead = s.start_lead_s
    starts = np.minimum(requests + lead * speed, duration)
    rest = np.full(requests.size, duration)
    moving = starts < duration
    rest[moving] = stop_ends(plan, config_bounds(plan, config), starts[moving], speed)
    ends = rest >= duration - 1e-9
    ramp = np.where(ends, (duration - starts) / speed, 2.0 * (rest - starts) / speed)
    controlled_time = np.where(np.isnan(rest), np.nan,
                               np.where(moving, lead + ramp, (duration - requests) / speed)
                               + s.stop_settle_s)
    run_on = np.minimum(requests + s.hold_overshoot_s * speed, duration)
    lagging = np.maximum(requests - s.tracking_lag_s * speed, 0.0)   # where the arm is

    def to_original(x: np.ndarray) -> np.ndarray:
        return x if original is None else np.interp(x, original[0], original[1])

    a, b, h = to_original(lagging), to_original(np.nan_to_num(rest, nan=0.0)), \
        to_original(run_on)
    over = s.stop_overtravel_m
    controlled_travel = {arm: np.where(np.isnan(rest), np.nan, paths.between(arm, a, b) + over)
                         for arm in plan.arm_names}
    # a held arm runs on past where the cancel found it and comes back: its run-on counted
    # there and back
    r0 = to_original(requests)
    hold_travel = {arm: paths.between(arm, a, h) + paths.between(arm, r0, h) + over
                   for arm in plan.arm_names}
    return Envelope(requests, speed, controlled_time, controlled_travel,
                    np.where(np.isnan(rest), np.nan, b), s.hold_settle_s, hold_travel,
                    {arm: paths.hand[arm] for arm in plan.arm_names}, whole)


def has_limits(config: ExecutorConfig, arms) -> bool:
    return any(v is not None for a in arms for v in config.stop_limits(a))
