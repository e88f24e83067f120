"""Measurements on recorded joint states (ROS-free; numpy only).

:class:`JointSamples` holds /joint_states messages: header stamps (s, the controllers' clock),
receive times (s, this machine's ROS clock), and per-joint positions and velocities. Every
function takes the columns of one arm (shape (M, J)) or a sample set and returns seconds,
radians or hertz.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.interpolation import nearest_plan_time, sample
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.time_scaling import TimeScaling


@dataclass(frozen=True)
class JointSamples:
    stamps: np.ndarray       # (M,) header stamps, s
    received: np.ndarray     # (M,) receive times, s
    names: tuple[str, ...]   # (n,)
    positions: np.ndarray    # (M, n), NaN where a message did not carry the joint
    velocities: np.ndarray   # (M, n)
    efforts: Optional[np.ndarray] = None   # (M, n), NaN where a message carried none
    #: (M,) the order the messages arrived in (increasing numbers; None: unknown). Receive
    #: times can tie (a sim-time receiver reads /clock in ticks, and a stall hands it many
    #: messages at one reading): the order is then this, not the stamps'
    arrival: Optional[np.ndarray] = None

    def arm(self, joints: Sequence[str]) -> "JointSamples":
        """Only the messages that carry every one of ``joints``, only those columns, in order."""
        missing = [j for j in joints if j not in self.names]
        if missing:
            return JointSamples(np.zeros(0), np.zeros(0), tuple(joints),
                                np.zeros((0, len(joints))), np.zeros((0, len(joints))),
                                np.zeros((0, len(joints))))
        cols = [self.names.index(j) for j in joints]
        rows = ~np.isnan(self.positions[:, cols]).any(axis=1)
        efforts = None if self.efforts is None else self.efforts[rows][:, cols]
        return JointSamples(self.stamps[rows], self.received[rows], tuple(joints),
                            self.positions[rows][:, cols], self.velocities[rows][:, cols],
                            efforts, self._arrival(rows))

    def window(self, start: float, end: float) -> "JointSamples":
        rows = (self.stamps >= start) & (self.stamps <= end)
        return JointSamples(self.stamps[rows], self.received[rows], self.names,
                            self.positions[rows], self.velocities[rows],
                            None if self.efforts is None else self.efforts[rows],
                            self._arrival(rows))

    def received_since(self, start: float) -> "JointSamples":
        """Only the messages received at or after ``start`` (s, the receiver's clock): a
        window that a controller clock stepping back cannot move messages out of."""
        rows = self.received >= start
        return JointSamples(self.stamps[rows], self.received[rows], self.names,
                            self.positions[rows], self.velocities[rows],
                            None if self.efforts is None else self.efforts[rows],
                            self._arrival(rows))

    def __len__(self) -> int:
        return int(self.stamps.size)

    def _arrival(self, rows) -> Optional[np.ndarray]:
        return None if self.arrival is None else self.arrival[rows]


def rate_hz(samples: JointSamples) -> float:
    """Messages per second over the span of their stamps (0 with fewer than two)."""
    if len(samples) < 2:
        return 0.0
    span = float(samples.stamps[-1] - samples.stamps[0])
    return (len(samples) - 1) / span if span > 0 else 0.0


def clock_offset(samples: JointSamples) -> float:
    """The controller clock's offset against the receiver's, s (positive: ahead):
    -min(receive time - header stamp) = offset - minimum latency (the executor's estimator,
    ``ros/joint_state_monitor.py``); NaN without samples."""
    if len(samples) == 0:
        return float("nan")
    return float(-np.min(samples.received - samples.stamps))


def limit_excess(positions: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Largest distance (rad or m) of any position outside [lower, upper]; 0 inside."""
    if positions.size == 0:
        return float("nan")
    return float(np.max(np.maximum(lower - positions, positions - upper).clip(min=0.0)))


#: the whole turns a reading outside its limits is looked at for (+-): a multi-turn counter
#: lost at a power cycle reads whole turns off (IsaacTeleop#734: -0.056 rad read as +6.227)
WHOLE_TURNS = 3


def outside_limits(position: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   names: Sequence[str]) -> str:
    """Each joint of ``position`` (J,) outside [lower, upper], named, with its reading and its
    limits (rad or m); one that reads a whole number of turns (k x 2 pi, |k| <= WHOLE_TURNS)
    from a position inside them says so. "" when every joint is inside."""
    out = []
    for j, name in enumerate(names):
        q, lo, hi = float(position[j]), float(lower[j]), float(upper[j])
        if lo <= q <= hi:
            continue
        text = f"{name} reads {q:+.3f}, outside [{lo:+.3f}, {hi:+.3f}]"
        turns = sorted((k for k in range(-WHOLE_TURNS, WHOLE_TURNS + 1)
                        if k and lo <= q - 2 * np.pi * k <= hi), key=abs)
        if turns:
            k = turns[0]
            text += (f": {abs(k)} whole turn{'s' if abs(k) > 1 else ''} "
                     f"{'above' if k > 0 else 'below'} {q - 2 * np.pi * k:+.3f}, inside them "
                     "(a multi-turn position lost at a power cycle? Re-home the joint before "
                     "anything moves)")
        out.append(text)
    return "; ".join(out)


def onset(samples: JointSamples, after: float, threshold: float) -> Optional[float]:
    """When any joint first gets more than ``threshold`` from its position at ``after`` (the
    last sample at or before it), s; linearly interpolated between the two samples around the
    crossing, so the result is not quantized to the sampling period. None if it never does."""
    if len(samples) == 0:
        return None
    k0 = max(int(np.searchsorted(samples.stamps, after, side="right")) - 1, 0)
    ref = samples.positions[k0]
    dev = np.max(np.abs(samples.positions[k0:] - ref), axis=1)
    hits = np.flatnonzero(dev > threshold)
    if hits.size == 0:
        return None
    k = int(hits[0])
    t = samples.stamps[k0:]
    if k == 0:
        return float(t[0])
    frac = (threshold - dev[k - 1]) / (dev[k] - dev[k - 1])
    return float(t[k - 1] + frac * (t[k] - t[k - 1]))


def planned_onset(traj: ArmTrajectory, threshold: float, step: float = 0.001) -> Optional[float]:
    """First plan time (s from its start) at which any joint is more than ``threshold`` from the
    first waypoint."""
    t = np.arange(0.0, traj.duration + step, step)
    q = sample(traj, t)[0]
    hits = np.flatnonzero(np.max(np.abs(q - traj.positions[0]), axis=1) > threshold)
    return None if hits.size == 0 else float(t[hits[0]])


def start_skew(latenesses: Sequence[float]) -> float:
    """Spread (max - min) of the arms' onset lateness relative to the plan, s; NaN (not
    measured) with fewer than two arms: a skew needs two onsets."""
    return float(max(latenesses) - min(latenesses)) if len(latenesses) >= 2 else float("nan")


def stop_time(samples: JointSamples, after: float, speed_threshold: float) -> float:
    """Seconds from ``after`` until every joint is and stays slower than ``speed_threshold``
    (inf if the recording ends with the arm still moving)."""
    s = samples.window(after, np.inf)
    if len(s) == 0:
        return float("inf")
    moving = np.max(np.abs(s.velocities), axis=1) >= speed_threshold
    if moving[-1]:
        return float("inf")
    still_moving = np.flatnonzero(moving)
    if still_moving.size == 0:
        return max(0.0, float(s.stamps[0] - after))
    return float(s.stamps[still_moving[-1] + 1] - after)


def moving_mask(velocities: np.ndarray, threshold: float) -> np.ndarray:
    return np.max(np.abs(velocities), axis=1) >= threshold if velocities.size else np.zeros(0, bool)


def overlap_s(stamps: np.ndarray, mask_a: np.ndarray, mask_b: np.ndarray) -> float:
    """Total time (s) during which both masks are true (sample-and-hold between stamps)."""
    if stamps.size < 2:
        return 0.0
    both = (mask_a & mask_b)[:-1]
    return float(np.sum(np.diff(stamps)[both]))


def planned_overlap_s(trajs: Sequence[ArmTrajectory], threshold: float, step: float = 0.005) -> float:
    """Time the plan has every given arm moving at once, s."""
    duration = max(t.duration for t in trajs)
    t = np.arange(0.0, duration + step, step)
    masks = [moving_mask(sample(tr, t)[1], threshold) for tr in trajs]
    both = np.logical_and.reduce(masks)
    return float(np.sum(both[:-1]) * step)


def tracking_error(samples: JointSamples, traj: ArmTrajectory, start: float) -> float:
    """Largest |measured - planned| over the plan's span (plan time = stamp - start), rad."""
    s = samples.window(start, start + traj.duration)
    if len(s) == 0:
        return float("nan")
    planned = sample(traj, s.stamps - start)[0]
    return float(np.max(np.abs(s.positions - planned)))


def tracking_lag(samples: JointSamples, traj: ArmTrajectory, start: float, joint: int,
                 moving: float = 0.3) -> float:
    """How late joint ``joint`` follows its plan, s: the least-squares delay ``L`` of
    ``measured(t) ~ planned(t) - L planned_velocity(t)`` over the samples where the planned
    speed is above ``moving`` x its peak (plan time = stamp - start). A servo lags by tens of
    milliseconds; states that echo the command lag by a control cycle. NaN: no such sample."""
    s = samples.window(start, start + traj.duration)
    if len(s) == 0:
        return float("nan")
    planned, velocity, _ = sample(traj, s.stamps - start)
    v = velocity[:, joint]
    keep = np.abs(v) > moving * np.max(np.abs(v)) if np.max(np.abs(v)) > 0 else v != v
    if not keep.any():
        return float("nan")
    lead = planned[keep, joint] - s.positions[keep, joint]
    return float(np.dot(lead, v[keep]) / np.dot(v[keep], v[keep]))


def travel_after(samples: JointSamples, after: float) -> float:
    """The largest joint displacement (rad) from the first sample at or after ``after`` to the
    last sample (NaN without samples there): how far the arm went once asked to stop."""
    s = samples.window(after, np.inf)
    if len(s) == 0:
        return float("nan")
    return float(np.max(np.abs(s.positions[-1] - s.positions[0])))


def progress_at_rest(samples: JointSamples, traj: ArmTrajectory, step: float = 0.001) -> float:
    """The plan time whose pose is nearest the last sample's (max-norm over the joints; the
    plan sampled every ``step`` s), s: where along a one-way motion the arm came to rest."""
    if len(samples) == 0:
        return float("nan")
    return nearest_plan_time(traj, samples.positions[-1], 0.0, traj.duration, step)[0]


def settle_time(samples: JointSamples, after: float, tolerance: float) -> float:
    """Seconds from ``after`` until every joint is and stays within ``tolerance`` (rad) of its
    last recorded position (inf without samples after ``after``)."""
    s = samples.window(after, np.inf)
    if len(s) == 0:
        return float("inf")
    away = np.flatnonzero(np.max(np.abs(s.positions - s.positions[-1]), axis=1) > tolerance)
    if away.size == 0:
        return max(0.0, float(s.stamps[0] - after))
    return float(s.stamps[away[-1] + 1] - after) if away[-1] + 1 < len(s) else float("inf")


def predicted_settle_time(traj: ArmTrajectory, stamp: float, plan_time_stamp: float,
                          ramp_s: float, tolerance: float, step: float = 0.001) -> float:
    """From a controlled stop's record (its ramp starting at ``stamp``, the controllers' clock,
    at plan time ``plan_time_stamp``, lasting ``ramp_s``): what :func:`settle_time` measures on
    the arm from ``stamp``, predicted on the *reference* the stop sends."""
    t = np.arange(stamp, stamp + ramp_s + step, step)
    advanced, _, _ = TimeScaling.ramp(1.0, 0.0, ramp_s).at(t - stamp)
    q, _, _ = sample(traj, np.clip(plan_time_stamp + advanced, 0.0, traj.duration))
    away = np.flatnonzero(np.max(np.abs(q - q[-1]), axis=1) > tolerance)
    return 0.0 if away.size == 0 else float(t[away[-1]] + step - stamp)
