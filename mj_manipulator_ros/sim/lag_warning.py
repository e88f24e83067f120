"""When the simulator's lag is worth a warning line, and how often.

On the system clock every control cycle measures the lag (``sim/sim_clock.py``). Most lags
are harmless: paced physics ends a cycle a little over one control period behind, and a
stall's lag is caught up. A lag matters only through a check it can trip, and while a goal
runs there are two:

- ``sim.max_lag_s``: the simulator aborts every active goal past it (0: off);
- the executor's ``execution.joint_state_timeout_s``: a stall of S seconds leaves physics at
  least S behind and the joint states silent for S; past the timeout the run fails
  ``joint_states_stale`` (0: off).

The lag warns above :data:`WARN_FRACTION` of the smaller of the two that is on (half way to
tripping it: room to act before it trips), with a goal active, at most once every
:data:`WARN_EVERY_S`. A lag while no goal is active trips nothing (the executor's clock check
before a start measures the simulator's stamps itself and names any offset), so it is never a
warning. Every lag of more than one control period is counted (``late_cycles``): the health
line and ``/diagnostics`` carry it with the worst lags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from mj_manipulator_ros.core.config import ExecutionSettings
from mj_manipulator_ros.sim.sim_config import SimSettings

#: a lag warns above this fraction of the smallest lag bound a check trips at
WARN_FRACTION = 0.5
#: at most one lag warning this often, s (monotonic)
WARN_EVERY_S = 1.0


@dataclass(frozen=True)
class LagThreshold:
    """The lag that warns and what it comes from.

    Attributes:
        lag_s: a lag above this (s) with a goal active warns; infinite: never.
        bound: the setting it is a fraction of ("" when both are off).
        bound_s: that setting's value, s.
    """

    lag_s: float
    bound: str
    bound_s: float

    @property
    def finite_s(self) -> Optional[float]:
        """``lag_s``, None when it never warns (for JSON)."""
        return self.lag_s if math.isfinite(self.lag_s) else None

    def describe(self) -> str:
        if not math.isfinite(self.lag_s):
            return "never warns: sim.max_lag_s and execution.joint_state_timeout_s are off"
        return (f"warns above {self.lag_s * 1e3:.0f} ms, {WARN_FRACTION:g} x {self.bound} "
                f"{self.bound_s * 1e3:.0f} ms")


def warn_lag_s(sim: SimSettings, execution: ExecutionSettings) -> LagThreshold:
    """The lag above which the simulator warns with a goal active: :data:`WARN_FRACTION` of
    the smaller of ``sim.max_lag_s`` and ``execution.joint_state_timeout_s`` that is on;
    infinite when both are off (no check a lag can trip)."""
    bounds = [(b, name) for b, name in ((sim.max_lag_s, "sim.max_lag_s"),
                                        (execution.joint_state_timeout_s,
                                         "execution.joint_state_timeout_s")) if b > 0]
    if not bounds:
        return LagThreshold(math.inf, "", 0.0)
    bound_s, name = min(bounds)
    return LagThreshold(WARN_FRACTION * bound_s, name, bound_s)


class LagWarnings:
    """Per control cycle: whether the lag is said, and the count of the lags that are not.

    Args:
        threshold: the lag that warns (:func:`warn_lag_s`).
        period_s: one control period, s: a lag above it counts as a late cycle.
        every_s: at most one warning this often, s.
    """

    def __init__(self, threshold: LagThreshold, period_s: float,
                 every_s: float = WARN_EVERY_S) -> None:
        self.threshold = threshold
        self.period_s = period_s
        self.every_s = every_s
        #: control cycles that ended more than one control period behind real time
        self.late_cycles = 0
        #: warnings said
        self.warnings = 0
        self._said_at = -math.inf

    def cycle(self, lag: float, active: bool, now: float) -> Optional[str]:
        """One cycle's lag (s), whether a goal is active, the monotonic time (s): the warning
        to log, or None."""
        if lag <= self.period_s:
            return None
        self.late_cycles += 1
        if not active or lag <= self.threshold.lag_s or now - self._said_at < self.every_s:
            return None
        self._said_at = now
        self.warnings += 1
        return (f"simulator behind real time by {lag * 1e3:.1f} ms with a goal running "
                f"({self.threshold.describe()}): this machine cannot keep the simulator in "
                "real time")
