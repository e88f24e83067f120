"""From the controllers' clock to this machine's: where a moment of the controllers' clock (sim
time, or a driver's clock) lands among the messages a recording keeps at their receipt times.

The executor's events (a goal sent, a stop asked, an arm's result) carry times of the
controllers' clock; a bag keeps the joint states at the moment this machine received them. An
event belongs next to the joint state *stamped* at its moment, which this machine received
later by the transport's delay (under load, a backlog of 100-200 ms) and, on sim time, at the
simulator's pace. :class:`ClockMap` keeps the (stamp, receipt) pairs of the joint states as
they come and maps an event's time through them: independent of pace, of backlog and of an
offset between the machines' clocks. Where no pair reaches (before the first kept, after the
last), it continues from the nearest pair at the clocks' measured rate.
"""

from __future__ import annotations

import collections
import struct
import threading
from typing import Callable

import numpy as np

#: a stamp this far (s) below the one before it is a new timeline (a simulator reset): the
#: pairs before it do not map the moments after it
BACKWARDS_S = 0.5


class ClockMap:
    """The (stamp, receipt) pairs of the last ``span_ns`` of receipt time. Any thread; two
    flat queues (no object per pair that the cyclic collector tracks).

    Args:
        span_ns: how far back (ns of receipt time) pairs are kept.
    """

    def __init__(self, span_ns: int) -> None:
        self.span_ns = int(span_ns)
        self._stamps: collections.deque = collections.deque()
        self._receipts: collections.deque = collections.deque()
        self._lock = threading.Lock()

    def add(self, stamp_s: float, receipt_ns: int) -> None:
        """One message stamped ``stamp_s`` (s, controllers' clock) received at ``receipt_ns``
        (ns, this machine's clock)."""
        with self._lock:
            self._stamps.append(stamp_s)
            self._receipts.append(receipt_ns)
            cutoff = receipt_ns - self.span_ns
            while self._receipts and self._receipts[0] < cutoff:
                self._receipts.popleft()
                self._stamps.popleft()

    def __len__(self) -> int:
        return len(self._stamps)

    def mapper(self, now_s: float, wall_ns: int, rate: float = 1.0) -> Callable[[float], int]:
        """A function: a moment ``t`` (s, controllers' clock) -> its receipt time (ns, this
        machine's clock).

        Args:
            now_s: the controllers' clock now, s (read with ``wall_ns``): the fallback's anchor
                when no pair was kept.
            wall_ns: this machine's clock now, ns.
            rate: seconds of the controllers' clock per second of this machine's: how the map
                continues beyond the kept pairs.
        """
        with self._lock:
            stamps = np.array(self._stamps, dtype=float)
            receipts = np.array(self._receipts, dtype=np.int64)
        if stamps.size:
            back = np.flatnonzero(np.diff(stamps) < -BACKWARDS_S)
            if back.size:   # the latest timeline only
                stamps, receipts = stamps[back[-1] + 1:], receipts[back[-1] + 1:]
        if stamps.size < 2:
            return lambda t: wall_ns - int((now_s - t) / rate * 1e9)
        order = np.argsort(stamps, kind="stable")
        stamps, receipts = stamps[order], receipts[order].astype(float)
        first, last = stamps[0], stamps[-1]

        def to_receipt(t: float) -> int:
            if t <= first:
                return int(receipts[0] - (first - t) / rate * 1e9)
            if t >= last:
                return int(receipts[-1] + (t - last) / rate * 1e9)
            return int(np.interp(t, stamps, receipts))
        return to_receipt


def header_stamp(data: bytes) -> float:
    """The stamp (s) of a serialized message that begins with a std_msgs/Header (CDR, as DDS
    delivers it: a 4-byte encapsulation header, then the stamp's sec and nanosec), without
    deserializing the rest."""
    order = "<" if data[1] & 1 else ">"
    sec, nanosec = struct.unpack_from(order + "iI", data, 4)
    return sec + nanosec * 1e-9
