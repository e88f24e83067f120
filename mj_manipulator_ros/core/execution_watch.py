"""Watching an execution while it runs, on the arms' joint states: tracking error, arms out of
step, joint states that stop or lie, joints faster than their limits. Plain values in, a
verdict out: the ROS layer feeds it messages and calls :meth:`ExecutionWatch.check_fresh`.

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

- **validity**: a non-finite position of a watched joint: ``joint_states_invalid`` (a NaN
  compares false against every tolerance; it must never read as "within").
- **velocity**: the message's velocity (else the difference of two positions of the joint at
  least ``MIN_DT_S`` apart) beyond the joint's limit x (1 + ``velocity_limit_margin``):
  ``velocity_limit`` (a controller that jumps to catch up with its reference).
- **freshness**: a watched joint not reported for ``joint_state_timeout_s`` (receipt time):
  ``joint_states_stale`` (without it an arm whose states stop is never checked again).

Each message is checked as it arrives: detection comes with the message that crosses a
threshold; freshness, which no message can report, is checked by the caller's clock.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.config import ExecutorConfig, limit_or_inf
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.sync import PlanClock
from mj_manipulator_ros.core.tolerances import joint_row

#: below this plan speed (norm over the arm's joints, rad/s or m/s) progress is not estimated
MIN_SPEED = 0.3
#: a progress estimate older than this (s of plan time) no longer counts for the skew
MAX_AGE_S = 0.05
#: the progress search grid, s
TAU_STEP_S = 0.005
#: a velocity is estimated from two positions of one joint at least this far apart (stamps), s
MIN_DT_S = 0.005
#: how far back (s of receipt time) an arm's tracking figure can be taken back to
#: (:meth:`ExecutionWatch.forget_since`): past it, what a result read that late covers stays
HISTORY_S = 10.0
#: the violations that are the joint-state stream's own (its messages stopped, lie, or show a
#: joint moving beyond its limit, as a stream interleaving a stale value with the true one
#: does): nothing measured afterwards on the arms' joint states can be trusted as a measurement
STREAM_FAILURES = frozenset({"joint_states_stale", "joint_states_invalid", "velocity_limit"})


@dataclass(frozen=True)
class Violation:
    """What tripped the watch. ``reason`` is a :class:`FailureReason` value:
    ``tracking_error``, ``progress_skew``, ``joint_states_stale``, ``joint_states_invalid`` or
    ``velocity_limit``. ``arms``: every arm it is about (a stale stream can be several arms';
    the first is ``arm``)."""

    reason: str
    arm: str
    text: str
    plan_time: float
    arms: tuple[str, ...] = ()
    #: when its first evidence reached this process (the receipt clock, s): the joint-state
    #: message that crossed the bound, or the moment a stream went stale; None: not known
    evidence_at: Optional[float] = None

    def stream_failed(self) -> Mapping[str, str]:
        """Arm -> why its joint states cannot measure anything (a figure computed from them
        would not be a measurement), for a failure of the stream itself
        (``STREAM_FAILURES``); empty for any other violation."""
        if self.reason not in STREAM_FAILURES:
            return {}
        why = f"the joint-state stream was the failure ({self.reason})"
        return {a: why for a in (self.arms or (self.arm,))}


class ExecutionWatch:
    """Args:
        plan: the plan being executed (validated).
        start: the start stamp, s (controllers' clock).
        clock: plan time from the controllers' clock (after a speed change); default: the
            plan at speed 1 from ``start``.
        config: tolerances (``execution.path_tolerance_rad``, ``arms[].path_tolerance``,
            ``execution.max_progress_skew_s``, ``execution.joint_state_timeout_s``,
            ``execution.velocity_limit_margin``, the joints' velocity limits).

    Joint states are merged by joint name (any subset of an arm's joints per message, as the
    configuration promises): each joint keeps its latest position, header stamp and receipt
    time. An arm is checked once every one of its joints has been reported; an arm that never
    was reports ``None`` (not watched), never 0.
    """

    def __init__(self, plan: MultiArmPlan, start: float, config: ExecutorConfig,
                 clock: Optional[PlanClock] = None) -> None:
        self.plan, self.start = plan, start
        self.clock = clock or PlanClock(start)   # plan time from a message stamp
        s = config.execution
        self.max_skew = s.max_progress_skew_s
        self.stale_after = s.joint_state_timeout_s
        half = max(2.0 * self.max_skew, 0.2)     # how far from the plan time progress is sought
        self._offsets = np.arange(-half, half + TAU_STEP_S / 2, TAU_STEP_S)
        self.tolerance: dict[str, np.ndarray] = {}
        self.velocity_limit: dict[str, np.ndarray] = {}
        self.joints: dict[str, tuple[str, ...]] = {}
        self._owner: dict[str, tuple[str, int]] = {}   # joint -> (arm, index in the arm)
        for arm in plan.arm_names:
            cfg = config.arm(arm)
            names = tuple(plan[arm].joint_names)
            self.joints[arm] = names
            self.tolerance[arm] = joint_row(cfg.path_tolerance, s.path_tolerance_rad, names)
            self.velocity_limit[arm] = np.array(
                [limit_or_inf(cfg.joint_limits.get(j), "velocity") for j in names]) \
                * (1.0 + s.velocity_limit_margin)
            for k, j in enumerate(names):
                self._owner[j] = (arm, k)
        # the plan sampled once on the progress grid (the search slices it; no spline is
        # evaluated per message for it)
        self._dense = {}
        for arm in plan.arm_names:
            grid = np.arange(0.0, plan[arm].duration + TAU_STEP_S / 2, TAU_STEP_S)
            p, v, _ = sample(plan[arm], grid)
            self._dense[arm] = (grid, p, v)
        # per arm and joint: latest position, its header stamp and its receipt time
        self._q = {a: np.full(len(j), np.nan) for a, j in self.joints.items()}
        self._stamp = {a: np.full(len(j), np.nan) for a, j in self.joints.items()}
        self._received = {a: np.full(len(j), np.nan) for a, j in self.joints.items()}
        #: per arm, the largest |tracking error| seen (rad or m); None: never measured
        self.max_tracking_error: dict[str, Optional[float]] = {a: None for a in plan.arm_names}
        #: per arm, the largest measured |joint velocity| (per s); None: never measured
        self.max_velocity: dict[str, Optional[float]] = {a: None for a in plan.arm_names}
        self.max_progress_skew = 0.0
        self._evidence: Optional[float] = None   # the receipt time of the message being read
        self._progress: dict[str, tuple[float, float]] = {}  # arm -> (plan time, progress)
        self.done: set[str] = set()   # arms no longer watched (their goal ended)
        self.violation: Optional[Violation] = None
        self._layouts: dict[tuple, list] = {}   # joint names of a message -> per-arm indices
        self._before: tuple = ({}, {}, 0.0)      # the figures before the latest message
        #: per arm, (receipt time, its max tracking error before that message) for the last
        #: HISTORY_S of messages: what :meth:`forget_since` takes back
        self._history: dict[str, collections.deque] = {a: collections.deque()
                                                       for a in plan.arm_names}

    def set_start(self, start: float, received: Optional[Mapping[str, float]] = None) -> None:
        """The start stamp, once known (the watch is built before it, off the stamp's path).
        ``received``: joint -> receipt time of its latest state before the start: a joint
        reported then is expected to go on being reported (the freshness check counts from
        there); a joint never reported is not watched (its arm reports None)."""
        self.start = start
        self.clock = PlanClock(start)
        for name, at in (received or {}).items():
            owner = self._owner.get(name)
            if owner is not None and np.isnan(self._received[owner[0]][owner[1]]):
                self._received[owner[0]][owner[1]] = at

    def on_joint_state(self, names: Sequence[str], positions: Sequence[float], stamp: float,
                       received: Optional[float] = None,
                       velocities: Optional[Sequence[float]] = None) -> Optional[Violation]:
        """Check one message (any subset of any arms' joints); returns the (first) violation it
        causes, else None. ``received``: receipt time (the freshness check's clock);
        ``velocities``: the message's velocities (else estimated from positions)."""
        if self.violation is not None:
            return None
        self._evidence = received   # the message a violation found now is the evidence
        # the figures before this message: a violation withdrawn takes its readings with it
        self._before = (dict(self.max_tracking_error), dict(self.max_velocity),
                        self.max_progress_skew)
        t = self.clock.plan_time(stamp)
        q_msg = np.asarray(positions, dtype=float)
        v_msg = None
        if velocities is not None and len(velocities) == len(names):
            v_msg = np.asarray(velocities, dtype=float)
        at = stamp if received is None else received
        touched = []
        for arm, mi, ji in self._layout(names, len(positions)):
            if arm in self.done:
                continue
            q = q_msg[mi]
            bad = np.flatnonzero(~np.isfinite(q))
            if bad.size:
                name = self.joints[arm][ji[bad[0]]]
                return self._trip("joint_states_invalid", arm, t,
                                  f"joint {name!r} reports position {q[bad[0]]} at plan time "
                                  f"{t:.3f} s; expected a finite number")
            v = v_msg[mi] if v_msg is not None else np.full(q.size, np.nan)
            dt = stamp - self._stamp[arm][ji]
            estimate = ~np.isfinite(v) & (dt >= MIN_DT_S)       # NaN stamps compare false
            if estimate.any():
                v = np.where(estimate, (q - self._q[arm][ji]) / np.where(estimate, dt, 1.0), v)
            self._q[arm][ji], self._stamp[arm][ji], self._received[arm][ji] = q, stamp, at
            touched.append(arm)
            speed = np.abs(v)
            if np.isfinite(speed).any():
                peak = float(np.nanmax(speed))
                prev = self.max_velocity[arm]
                self.max_velocity[arm] = peak if prev is None else max(prev, peak)
                over = np.flatnonzero(speed > self.velocity_limit[arm][ji])
                if over.size:
                    k = int(over[0])
                    name = self.joints[arm][ji[k]]
                    return self._trip("velocity_limit", arm, t,
                                      f"joint {name!r} measured at {v[k]:+.3f} per s at plan time "
                                      f"{t:.3f} s, beyond its limit with margin "
                                      f"({self.velocity_limit[arm][ji[k]]:.3f})")
        for arm in touched:
            if np.isnan(self._q[arm]).any():
                continue   # not every joint reported yet
            history = self._history[arm]
            history.append((at, self.max_tracking_error[arm]))
            while history[0][0] < at - HISTORY_S:
                history.popleft()
            violation = self._check_arm(arm)
            if violation is not None:
                return violation
        return self._skew(t)

    def _layout(self, names: Sequence[str], n_positions: int) -> list:
        """Per watched arm in a message with these joint names: (arm, indices into the
        message, indices into the arm's joints); computed once per distinct name list."""
        key = (tuple(names), n_positions)
        layout = self._layouts.get(key)
        if layout is None:
            per_arm: dict[str, tuple[list, list]] = {}
            for n, name in enumerate(names):
                owner = self._owner.get(name)
                if owner is not None and n < n_positions:
                    mi, ji = per_arm.setdefault(owner[0], ([], []))
                    mi.append(n)
                    ji.append(owner[1])
            layout = [(arm, np.array(mi), np.array(ji)) for arm, (mi, ji) in per_arm.items()]
            if len(self._layouts) < 64:   # a publisher that varies its names is not cached
                self._layouts[key] = layout
        return layout

    def next_stale_in(self, now: float) -> Optional[float]:
        """How long (s of the receipt clock) from ``now`` until the first watched joint, once
        reported, would go stale if no message came meanwhile: the freshness check is due
        then, not at its next tick. None when the check is off or no watched joint was
        reported yet."""
        if self.violation is not None or self.stale_after <= 0:
            return None
        latest = [self._received[a] for a in self.joints if a not in self.done]
        if not latest:
            return None
        with np.errstate(invalid="ignore"):
            oldest = np.nanmin(np.concatenate(latest)) if any(
                np.isfinite(r).any() for r in latest) else np.nan
        if not np.isfinite(oldest):
            return None
        return float(oldest + self.stale_after - now)

    def check_fresh(self, now: float) -> Optional[Violation]:
        """Fail an arm (still watched) one of whose joints, once reported, has not been reported
        for longer than ``joint_state_timeout_s`` (receipt clock ``now``). None when every arm
        is fresh, or the check is off."""
        if self.violation is not None or self.stale_after <= 0:
            return None
        stale = {}
        for arm, joints in self.joints.items():
            if arm in self.done:
                continue
            with np.errstate(invalid="ignore"):
                age = now - self._received[arm]            # NaN: never reported
                over = np.flatnonzero(age > self.stale_after)
            if over.size:
                stale[arm] = ([joints[k] for k in over], float(np.max(age[over])))
        if not stale:
            return None
        arm, (names, age) = next(iter(stale.items()))
        watched = [a for a in self.joints if a not in self.done]
        if len(watched) > 1 and set(stale) == set(watched):
            text = (f"no joint state from any arm ({watched}) for {age * 1e3:.0f} ms "
                    f"(joint_state_timeout_s {self.stale_after:g}): their common source stopped "
                    "(a driver or simulator stalled or died, or the link is down)")
        else:
            text = (f"no joint state for {names} for {age * 1e3:.0f} ms (joint_state_timeout_s "
                    f"{self.stale_after:g}): the arm cannot be watched")
        # the evidence: the moment the oldest of its joints went stale
        return self._trip("joint_states_stale", arm, self.clock.plan_time(now), text,
                          tuple(stale), evidence=now - age + self.stale_after)

    def _check_arm(self, arm: str) -> Optional[Violation]:
        """Tracking error of the arm's merged pose (each joint at its own stamp's plan time),
        and its progress when the joints were measured together."""
        joints, q, stamps = self.joints[arm], self._q[arm], self._stamp[arm]
        together = float(stamps.max() - stamps.min()) <= 1e-9
        if together:   # one message (or one stamp): one plan time
            times = [self.clock.plan_time(float(stamps[0]))] * len(joints)
            planned = self._planned(arm, times[0])
        else:
            times = [self.clock.plan_time(float(s)) for s in stamps]
            planned = np.array([self._planned(arm, tk)[k] for k, tk in enumerate(times)])
        err = q - planned
        tol = self.tolerance[arm]
        worst = float(np.max(np.abs(err), initial=0.0))
        prev = self.max_tracking_error[arm]
        self.max_tracking_error[arm] = worst if prev is None else max(prev, worst)
        over = np.flatnonzero((tol > 0) & (np.abs(err) > tol))
        if over.size:
            k = int(over[np.argmax(np.abs(err[over]) - tol[over])])
            return self._trip("tracking_error", arm, times[k],
                              f"joint {joints[k]!r} is {err[k]:+.4f} from the plan at plan time "
                              f"{times[k]:.3f} s, beyond its path tolerance {tol[k]:g}")
        t = max(times)
        if float(stamps.max() - stamps.min()) <= TAU_STEP_S and 0.0 <= t <= self.plan[arm].duration:
            progress = self._progress_of(arm, q, t)
            if progress is not None:
                self._progress[arm] = (t, progress)
        return None

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

    def withdraw(self) -> None:
        """Forget the violation and the figures of the message it was read on (the executor
        learned that an arm's goal had ended before those states: see ``done``); the next
        message is judged afresh."""
        self.violation = None
        tracking, velocity, skew = self._before
        for arm in self.done:
            self._progress.pop(arm, None)
            self.max_tracking_error[arm] = tracking.get(arm)
            self.max_velocity[arm] = velocity.get(arm)
        self.max_progress_skew = skew

    def forget_since(self, arm: str, since: float) -> None:
        """Take back ``arm``'s tracking figure of every message received after ``since`` (the
        receipt clock): its controller had ended its goal by then, unread here. Messages older
        than HISTORY_S are kept (the figure can only be overstated, never understated)."""
        for received, before in self._history[arm]:
            if received > since:
                self.max_tracking_error[arm] = before
                break
        self._history[arm].clear()

    def _trip(self, reason: str, arm: str, t: float, text: str,
              arms: tuple[str, ...] = (), evidence: Optional[float] = None) -> Violation:
        self.violation = Violation(reason, arm, text, t, arms or (arm,),
                                   self._evidence if evidence is None else evidence)
        return self.violation

    def stats(self) -> Mapping[str, tuple[Optional[float], float]]:
        """Per arm: (max tracking error, rad, None if never measured; max progress skew, s)."""
        return {a: (self.max_tracking_error[a], self.max_progress_skew) for a in self.joints}
