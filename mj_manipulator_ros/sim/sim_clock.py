"""The simulator's own clock, and how far behind real time it runs.

A simulator on the system clock (``use_sim_time: false``) maps physics time to ROS time:
``clock(t) = wall_at_anchor + (t - t_at_anchor) / real_time_factor``. References, goal start
stamps and every stamp the simulator writes are read on this clock, so a stall of the physics
thread freezes references and physics together: every stamp says when its state was true, and
the arms are never blamed for the simulator's own stall. The **lag** is the system clock minus
that clock (s): how far behind real time the physics is. With ``use_sim_time`` the clock is
physics time itself (``/clock``); the lag is then the pacing deficit against the wall clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional


class SimClock:
    """Args:
        real_time_factor: simulated seconds per wall second (> 0 on the system clock).
        use_sim_time: the controllers' clock is physics time (``/clock``).
        wall: the system clock (s); monotonic pacing under ``use_sim_time``.
    """

    def __init__(self, real_time_factor: float, use_sim_time: bool,
                 wall: Optional[Callable[[], float]] = None) -> None:
        self.real_time_factor = real_time_factor
        self.use_sim_time = use_sim_time
        self._wall = wall or (time.monotonic if use_sim_time else time.time)
        self._wall0: Optional[float] = None
        self._sim0 = 0.0

    def anchor(self, sim_time: float) -> float:
        """From now on, ``sim_time`` is now (the lag restarts at 0). Returns how far the
        clock's reading at ``sim_time`` jumped forward (s): the time a re-anchor drops, exactly
        what the stamps skip; 0 at the first anchor and on sim time (its stamps are physics
        time: they skip nothing)."""
        before = None if self._wall0 is None or self.real_time_factor <= 0 or \
            self.use_sim_time else self(sim_time)
        self._wall0, self._sim0 = self._wall(), sim_time
        return 0.0 if before is None else self._wall0 - before

    def set_rate(self, real_time_factor: float, sim_time: float) -> None:
        """From physics time ``sim_time`` on, run at ``real_time_factor`` (> 0). On the system
        clock the clock is continuous there (its reading at ``sim_time`` does not change: no
        stamp jumps), and the lag with it. On sim time the pacing restarts at ``sim_time``
        (lag 0): a deficit built up at the old pace is not caught up at the new one (physics
        would run flat out, faster than asked, in the first moments at the new pace; a
        latency measured there at real time would be multiplied), and physics time, the
        clock, skips nothing."""
        if self.use_sim_time:
            self._wall0, self._sim0 = self._wall(), sim_time
        elif self._wall0 is not None and self.real_time_factor > 0:
            here = self._wall0 + (sim_time - self._sim0) / self.real_time_factor
            self._wall0, self._sim0 = here, sim_time
        self.real_time_factor = real_time_factor

    def __call__(self, sim_time: float) -> float:
        """The controllers' clock (s) at physics time ``sim_time``."""
        if self.use_sim_time:
            return sim_time
        if self._wall0 is None:
            self.anchor(sim_time)
        return self._wall0 + (sim_time - self._sim0) / self.real_time_factor

    def lag(self, sim_time: float) -> float:
        """How far (s of wall time) physics at ``sim_time`` is behind real time; negative when
        ahead (the pacing then waits). 0 when unpaced (``real_time_factor`` 0)."""
        if self.real_time_factor <= 0:
            return 0.0
        if self._wall0 is None:
            self.anchor(sim_time)
        return self._wall() - (self._wall0 + (sim_time - self._sim0) / self.real_time_factor)


@dataclass(frozen=True)
class SimHealth:
    """The simulator's timekeeping, as published on ``/diagnostics`` and printed on exit.

    Attributes:
        cycles: control cycles run.
        real_time_factor: simulated seconds per wall second over the last second (achieved).
        lag_s: how far physics is behind real time now (s).
        worst_lag_s: the largest lag seen (s).
        worst_stall_s: the longest wall time between two control cycles' starts (s).
        aborts: goals aborted because the lag passed ``sim.max_lag_s``.
        reanchors: times the clock re-anchored while idle.
        scheduling: what the physics thread's scheduling request got ("SCHED_FIFO 50",
            "not requested", or why it was refused).
        worst_active_lag_s: the largest lag seen while a goal was active (s): what
            ``sim.max_lag_s`` is compared with.
        late_cycles: control cycles that ended more than one control period behind.
        lag_warnings: lag warnings logged (``sim/lag_warning.py``).
        warn_lag_s: a lag above this with a goal active warns (s; None: never).
        dropped_s: how far the re-anchors moved the clock forward (s): what its stamps
            skipped, never caught up.
        fifo_demotions: times the physics thread left SCHED_FIFO to catch up (it runs at
            normal priority while it runs without waiting).
    """

    cycles: int
    real_time_factor: float
    lag_s: float
    worst_lag_s: float
    worst_stall_s: float
    aborts: int
    reanchors: int
    scheduling: str
    worst_active_lag_s: float = 0.0
    late_cycles: int = 0
    lag_warnings: int = 0
    warn_lag_s: Optional[float] = None
    dropped_s: float = 0.0
    fifo_demotions: int = 0

    def summary(self) -> str:
        warns = ("never warns" if self.warn_lag_s is None else
                 f"warns above {self.warn_lag_s * 1e3:.0f} ms")
        return (f"{self.cycles} control cycles, achieved real-time factor "
                f"{self.real_time_factor:.2f}, worst stall {self.worst_stall_s * 1e3:.1f} ms, "
                f"worst lag {self.worst_lag_s * 1e3:.1f} ms (with a goal active "
                f"{self.worst_active_lag_s * 1e3:.1f} ms; {warns}: {self.lag_warnings} "
                f"warning(s)), {self.late_cycles} cycle(s) more than a control period behind, "
                f"{self.aborts} goal(s) aborted for lag, {self.reanchors} re-anchor(s) "
                f"({self.dropped_s:.3f} s of physics time dropped); physics thread "
                f"{self.scheduling}" + (f" (normal scheduling while catching up: "
                                        f"{self.fifo_demotions} time(s))"
                                        if self.fifo_demotions else ""))
