"""The stop band a failure needs, computed from the plan's stopping distances (not assumed).

When arm A fails while its peers are still controllable, A holds (its controller's own hold
after an abort, or a cancel) and every peer takes the controlled stop along the plan
(``core/time_scaling.py``). The band replay (``check/band.py``) certifies every pair of arms at
plan times ``t1``, ``t2`` with ``|t1 - t2| <= skew``; this module computes the skew that covers
such a stop:

- A's progress p (the plan time its pose is at) falls behind its peers' until the watch sees
  the two more than ``max_progress_skew_s`` apart (``detection``, plan time): the peers ask for
  the stop at most at plan time p + detection (a tracking error or an abort comes sooner);
- from a request at plan time s, the peers keep the plan for one start lead and ramp to rest at
  plan time r(s), computed exactly as the executor computes it (the stop distances);
- A, canceled while moving, comes to rest at most ``hold_overshoot_s`` of plan time past where
  its cancel found it (``execution.hold_overshoot_s``: measured per controller kind by
  ``check-plan --stops --hold``, on the robot by HIL stage 3).

So the pairs reached are (p + h, r(p + detection)) with h in [0, hold]: the band needs
``max_p r(p + detection) - p`` on the peers' side and ``detection + hold`` on A's, for any arm
as A (the band is symmetric). r is computed for requests every ``every`` s of plan time; between
two requests the larger rest of the two is taken (exact when r is non-decreasing between them).
A cancel of every arm (an arm gone, a second Ctrl-C) leaves the arms ``stop_skew_s`` apart at
most (measured by HIL stage 6); the band certified is the widest of the three.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.stop_ends import stop_ends
from mj_manipulator_ros.core.time_scaling import config_bounds

#: default spacing of the failure times the stop is computed for, s of plan time
EVERY_S = 0.05


@dataclass(frozen=True)
class FailureBand:
    """The band a stop after any failure needs (s of plan time).

    Attributes:
        skew_s: the half-width to certify: the largest of the three below.
        controlled_s: the peers' side: how far past a failed arm's plan time its peers come to
            rest, worst over the plan; ``at_plan_time`` is that failure's plan time.
        held_s: the failed arm's side: detection + hold overshoot.
        cancel_s: ``execution.stop_skew_s`` (every arm canceled).
        detection_s, hold_s, lead_s: the terms used.
        cancels: of the ``failures`` failure times sampled, those from which no controlled stop
            exists within the limits (the executor cancels every arm: ``cancel_s`` covers it).
    """

    skew_s: float
    controlled_s: float
    at_plan_time: float
    held_s: float
    cancel_s: float
    detection_s: float
    hold_s: float
    lead_s: float
    cancels: int = 0
    failures: int = 0

    @property
    def set_by(self) -> str:
        if self.skew_s == self.controlled_s:
            return (f"a failure at plan time {self.at_plan_time:.2f} s: its peers come to rest "
                    f"{self.controlled_s * 1e3:.0f} ms of plan time further (detection "
                    f"{self.detection_s * 1e3:.0f} ms, start lead {self.lead_s * 1e3:.0f} ms, "
                    "then the controlled stop)")
        if self.skew_s == self.held_s:
            return (f"the failed arm's detection {self.detection_s * 1e3:.0f} ms and hold "
                    f"overshoot {self.hold_s * 1e3:.0f} ms")
        return f"execution.stop_skew_s {self.cancel_s * 1e3:.0f} ms (every arm canceled)"

    def to_dict(self) -> dict:
        return {"skew_s": self.skew_s, "controlled_s": self.controlled_s,
                "at_plan_time": self.at_plan_time, "held_s": self.held_s,
                "cancel_s": self.cancel_s, "detection_s": self.detection_s,
                "hold_s": self.hold_s, "lead_s": self.lead_s, "cancels": self.cancels,
                "failures": self.failures, "set_by": self.set_by}


def rest_times(plan: MultiArmPlan, config: ExecutorConfig, requests: np.ndarray,
               speed: float = 1.0) -> np.ndarray:
    """Where every arm stands after a controlled stop asked at each plan time of ``requests``
    (K,) with the plan running at ``speed``: one start lead at that speed, then the ramp the
    executor computes. Returns (K,) plan times, s; NaN where no stop within the limits exists
    (the executor then cancels every arm)."""
    lead = config.execution.start_lead_s
    bounds = config_bounds(plan, config)
    # as stop_after_lead asks them (one start lead at that speed), all at once; NaN: no stop
    # within the limits from there (the executor cancels)
    starts = np.minimum(np.asarray(requests, dtype=float) + lead * speed, plan.duration)
    return stop_ends(plan, bounds, starts, speed)


def detected_at(failures: np.ndarray, detection: float, every: float, duration: float
                ) -> np.ndarray:
    """(K,) where each failure of ``failures`` (every ``every`` s of plan time from 0, then
    possibly ``duration``) is detected: ``detection`` later, at most ``duration``. Where the
    detection is a whole number m of steps, the grid's own times (k + m) ``every``, bit for bit
    the stop envelope's request times (``check/stop_envelope.py``): the stops the envelope
    predicted for the plan are then the ones the band needs, computed once
    (``core/stop_ends.stop_ends`` keeps them with the plan)."""
    out = np.minimum(failures + detection, duration)
    m = round(detection / every)
    if m * every == detection:
        n = int(np.count_nonzero(np.arange(failures.size) * every == failures))
        out[:n] = np.minimum(np.arange(m, m + n) * every, duration)
    return out


def failure_band(plan: MultiArmPlan, config: ExecutorConfig,
                 every: float = EVERY_S) -> FailureBand:
    """The band of the module docstring for ``plan`` (validated, at the speed it will run).

    Raises:
        ConfigError: ``max_progress_skew_s`` is 0: nothing bounds how far peers run on past a
            frozen arm.
    """
    s = config.execution
    detection = s.max_progress_skew_s
    if detection <= 0:
        raise ConfigError(
            "the pre-flight gate computes how far an arm's peers run on after it fails from "
            "execution.max_progress_skew_s (the watch's bound on arms out of step), which is 0 "
            "(off): set it > 0 (default 0.1 s), or turn execution.preflight_check off")
    duration = plan.duration
    failures = np.arange(0.0, duration, every)
    if failures.size == 0 or failures[-1] < duration:
        failures = np.append(failures, duration)
    rest = rest_times(plan, config, detected_at(failures, detection, every, duration))
    upper = np.fmax(rest, np.append(rest[1:], rest[-1]))   # the later rest of each pair
    need = upper - failures
    cancels = int(np.count_nonzero(np.isnan(need)))
    if cancels == need.size:
        controlled, at = 0.0, float("nan")
    else:
        k = int(np.nanargmax(need))
        controlled, at = float(need[k]), float(failures[k])
    held = detection + s.hold_overshoot_s
    return FailureBand(max(controlled, held, s.stop_skew_s), controlled, at, held,
                       s.stop_skew_s, detection, s.hold_overshoot_s, s.start_lead_s, cancels,
                       int(need.size))
