"""The joint-state stream of an arm standing still: holes, clock steps, drift (HIL stage 1).

Measured on the messages in the order they arrived (not sorted by stamp: a clock that steps
back would reorder them):

- a **hole** is the largest interval between consecutive header stamps: the controller stopped
  publishing (a stalled driver) or messages were lost (a bus or network dropping them); at the
  expected rate it says how many messages are missing. Receive times are not used: a busy
  receiving machine delays delivery without any hole in the stream.
- a **clock step** is a lasting change of ``received - stamp`` (the latency plus the clocks'
  offset). A late delivery (the receiver stalled) only ever raises it, for a while; so a step
  is where its least value before and after differ, and by how much (then the next, with that
  one taken out). A hole is measured with the steps taken out.
- **drift** is the largest range (max - min) of any joint's position over the window: an arm
  that should hold still and creeps (a brake slipping, a gain too weak for a changing load).

Shapes: positions (M, J); stamps and receive times (M,), s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

#: fewest messages on each side of a clock step for it to be measured (0.5 s at 100 Hz: longer
#: than a busy receiver's stall, so that each side holds messages delivered on time; a step
#: nearer an end of the window than this is not seen)
SIDE = 50
#: how far (periods) a clock step's latency estimate must be off its stamp interval's excess
#: before messages lost in that interval are believed (:func:`_whole_periods_off`)
LOSS_BELIEVED = 0.75


@dataclass(frozen=True)
class Hole:
    """The largest interval between consecutive stamps.

    Attributes:
        length_s: its length, s (one period when the stream is healthy).
        at: the stamp of the last message before it, s.
        missing: messages missing at the expected rate (0 when healthy).
    """

    length_s: float
    at: float
    missing: int


@dataclass(frozen=True)
class ClockStep:
    """The largest lasting change of ``received - stamp``.

    Attributes:
        step_s: how far the controller's clock stepped, s (positive: forward).
        at: the stamp of the first message after it, s (NaN: no step).
        index: that message's place in arrival order (-1: no step).
    """

    step_s: float
    at: float
    index: int = -1


def arrival_order(stamps: np.ndarray, received: np.ndarray,
                  arrival: Optional[np.ndarray] = None) -> np.ndarray:
    """Indices that put messages in the order they arrived: by ``arrival`` (M,) when the
    receiver numbered them (``JointSamples.arrival``), else by receive time (stable for equal
    ones). Receive times tie on a sim-time receiver (its /clock in ticks, many messages at one
    reading after a stall): in stamp order a clock stepping back then interleaves messages
    from either side of the step (beside two busy loops, a -50 ms step read as -110, +30, +30
    and -50 ms)."""
    if arrival is not None:
        return np.argsort(arrival, kind="stable")
    return np.argsort(received, kind="stable")


def largest_hole(stamps: np.ndarray, received: np.ndarray, expected_rate_hz: float,
                 steps: list[ClockStep] = (), arrival: Optional[np.ndarray] = None) -> Hole:
    """The largest interval between consecutive stamps, in arrival order (s); NaN with fewer
    than two messages. The stamps after each of ``steps`` (clock steps measured on the same
    messages, :func:`clock_steps`) are taken back by it: a clock stepping forward is not a
    hole."""
    if stamps.size < 2:
        return Hole(float("nan"), float("nan"), 0)
    s = stamps[arrival_order(stamps, received, arrival)].astype(float)
    for step in steps:
        s[step.index:] -= step.step_s
    d = np.diff(s)
    k = int(np.argmax(d))
    length = float(d[k])
    missing = max(int(round(length * expected_rate_hz)) - 1, 0)
    return Hole(length, float(s[k]), missing)


def clock_steps(stamps: np.ndarray, received: np.ndarray, threshold: float,
                side: int = SIDE, max_steps: int = 8,
                arrival: Optional[np.ndarray] = None) -> list[ClockStep]:
    """Every lasting change of ``received - stamp`` beyond ``threshold`` (s), largest first,
    sign flipped so that a controller clock stepping forward is positive.

    A late delivery only ever raises that latency, so its least value over a stretch of
    messages moves only when the clock steps. **Where**: for each message k with at least
    ``side`` messages on either side, the least latency from k on minus the least before k. A
    clock stepping forward lowers it from its step on: the change is the step for every k up to
    the step (the step is the last of them); stepping back raises it from the step on (the
    first). A clock step moves the stamps too (the controller's own clock, which no receiver
    stall blurs), unless its loop is paced by the stepped clock: it is placed on the stamp
    interval off the period by more than ``threshold`` nearest k (within ``side`` messages of
    that stretch of k; of two as near, the one nearer one period plus its size there); without
    one, where the latency changed. **How
    far**: the least latency of the whole stretch after it (up to the next such interval or
    step) minus that of the stretch before it; a stretch outlasts a receiver stall where
    ``side`` messages need not (CI, stop 53: a 0.5 s stall after a -50 ms step measured it
    -90 ms over 50 messages, and the error taken out read as steps and a hole). Placed on an
    odd stamp interval, it is that interval's excess over the period instead (less whole
    periods of lost messages, :func:`_whole_periods_off`): least latencies are only as good as
    the receive clock and the receiver's least delay on each side (a fresh-clone suite run, the
    HIL rehearsal's sim-time receiver with /clock every 4 ms: a -50 ms step read -52.0 ms).
    Then it is taken out and the next one looked for. Empty when the clock did not step."""
    n = stamps.size
    if n < 2 * side:
        return []
    order = arrival_order(stamps, received, arrival)
    s, lat = stamps[order], (received - stamps)[order].astype(float)
    steps: list[ClockStep] = []
    ks = np.arange(side, n - side + 1)
    period = float(np.median(np.diff(s)))
    off = np.diff(s) - period                   # off[i]: the interval ending at message i + 1
    breaks = np.flatnonzero(np.abs(off) > threshold) + 1    # messages after an odd interval
    for _ in range(max_steps):
        before = np.minimum.accumulate(lat)[ks - 1]             # least of lat[:k]
        after = np.minimum.accumulate(lat[::-1])[::-1][ks]      # least of lat[k:]
        change = after - before
        best = float(np.max(np.abs(change)))
        if best <= threshold:
            break
        j = int(np.argmax(np.abs(change)))
        plateau = np.abs(change - change[j]) <= 0.5 * threshold   # as large, within jitter
        # forward: the plateau's last k; back: its first
        span = ks[np.flatnonzero(plateau)]
        k = int(span[-1 if change[j] < 0 else 0])
        local = -float(lat[k:k + side].min() - lat[k - side:k].min())   # its size near k
        near = breaks[(breaks >= max(span[0] - side, 1)) & (breaks < min(span[-1] + side, n))
                      & ~np.isin(breaks, [c.index for c in steps])]
        if near.size:   # the nearest; of two as near, the one closer to the size
            k = int(min(near, key=lambda b: (abs(b - k), abs(off[b - 1] - local))))
        bounds = np.array([*breaks, *(c.index for c in steps), 0, n])
        lo, hi = int(bounds[bounds < k].max()), int(bounds[bounds > k].min())
        step = -float(lat[k:hi].min() - lat[lo:k].min())
        if k in breaks:   # the stamps say it exactly: the interval's excess over the period
            step = _whole_periods_off(float(off[k - 1]), step, period)
        if abs(step) <= threshold:
            break
        steps.append(ClockStep(step, float(s[k]), k))
        lat[k:] += step
    return sorted(steps, key=lambda c: -abs(c.step_s))


def _whole_periods_off(excess: float, estimate: float, period: float) -> float:
    """A clock step read from the stamp interval it falls in (s): that interval's ``excess``
    over the period is the step (stamps are on the controller's own clock: no receiver stall
    or receive-clock granularity moves them), less whole periods when messages were lost in
    that very interval. Lost messages are believed only when the latency ``estimate`` is off
    the no-loss reading by :data:`LOSS_BELIEVED` periods or more, then as many as put it
    nearest: a loss exactly at the step is a coincidence, a least latency some ms off is
    common on a loaded receiver (beside a busy loop, "nearest" read a -50 ms step as -60.0
    ms: the estimate was more than half a period off). Exact while the estimate is within that
    many periods (no loss), or within a quarter period (losses)."""
    d = excess - estimate
    return excess if abs(d) < LOSS_BELIEVED * period else excess - round(d / period) * period


def largest_step(steps: list[ClockStep]) -> ClockStep:
    """The largest of :func:`clock_steps` (a zero step when there is none)."""
    return max(steps, key=lambda c: abs(c.step_s)) if steps else ClockStep(0.0, float("nan"))


def drift(positions: np.ndarray) -> tuple[float, int]:
    """The largest range (max - min) of one joint's position over the window (rad or m), and
    that joint's index; NaN without samples."""
    if positions.shape[0] == 0:
        return float("nan"), -1
    ranges = np.ptp(positions, axis=0)
    j = int(np.argmax(ranges))
    return float(ranges[j]), j
