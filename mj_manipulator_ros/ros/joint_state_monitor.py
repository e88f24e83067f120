"""What the arms report about themselves: ``sensor_msgs/JointState`` on every configured topic,
merged by joint name.

One subscription per topic, on a node the executor already spins (no thread of its own). Each
joint keeps its latest position with the message's header stamp (the publishing controller's
clock) and its receipt time (this process's clock, the one start stamps are computed on). A
short window of (receipt - stamp) differences per joint is the raw material of the clock-offset
estimate: over a window, min(receipt - stamp) = minimum latency - offset, so
``offset ~= -min(receipt - stamp)`` (an upper bound of the true offset's magnitude error is the
minimum transport latency, sub-millisecond on one machine).

The receipt time of the estimate is the middleware's (DDS's reception timestamp, where rclpy
hands it over: ``MessageInfo``, Kilted on) whenever it is on this process's clock: a process
that handles its messages late (a loaded machine, a 500 Hz topic being recorded) reads them
late, and its own receipt time would count that backlog as the controller's clock offset.
On sim time the middleware's receipt (system clock) is on another clock than this process's;
a message this process read more than ``READ_LATE_S`` after the middleware received it is then
no offset sample (its receipt time here, the latest ``/clock``, would count the backlog: a
loaded suite read backlogs of 42-250 ms as "the controller's clock behind"). Under a backlog
that never clears (each message read late) there is no estimate, and the shortfall says why.
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
from rclpy.serialization import deserialize_message
from rclpy.subscription import Subscription
from sensor_msgs.msg import JointState

#: rclpy hands a two-argument callback the message's MessageInfo (Kilted on; not Humble, Jazzy)
WITH_MESSAGE_INFO = hasattr(getattr(Subscription, "CallbackType", None), "WithMessageInfo")


def _taking_info(handler: Callable) -> Callable:
    """``handler(msg, info=None)`` as the callback rclpy hands MessageInfo to (two arguments),
    where it does; else as it is."""
    return (lambda msg, info: handler(msg, info)) if WITH_MESSAGE_INFO else handler


#: a DDS reception time further than this (s) from this process's clock is on another clock
#: (this process on sim time): the receipt time is then this process's own
SAME_CLOCK_S = 5.0
#: on sim time, a message read more than this (s, system clock) after the middleware received
#: it is no offset sample (this process's clock reads now, the message arrived a backlog ago)
READ_LATE_S = 0.005


@dataclass(frozen=True)
class JointReading:
    """One joint's latest report: position (rad or m), header stamp and receipt time (s)."""

    position: float
    stamp: float
    received: float


#: how many readings per joint are kept for :meth:`JointStateMonitor.motion` (2 s at 500 Hz)
RECENT_KEEP = 1024


@dataclass(frozen=True)
class RecentMotion:
    """How far some joints moved over the latest stretch of their readings.

    Attributes:
        spread: the largest (max - min) of any joint's positions over the stretch (rad or m);
            None while the readings kept do not yet reach back the whole stretch.
        age_s: how long before now the latest reading of the joint heard from least recently
            came (s, this machine's clock): a stream that stopped shows, whichever it is.
    """

    spread: Optional[float]
    age_s: float


class JointStateMonitor:
    """Args:
        node: the node to subscribe on (spun elsewhere).
        topics: JointState topics.
        now: this process's clock (s), the one stamps are computed on.
        window_s: how long (s of receipt time) the offset window reaches back.
        names: per topic, a joint's name there -> its model name
            (``ExecutorConfig.names_on_topics``): every reading, and the listener, use the
            model's names; a name not in a topic's map passes as it is.
    """

    def __init__(self, node, topics: Iterable[str], now: Callable[[], float],
                 window_s: float = 1.0,
                 names: Optional[Mapping[str, Mapping[str, str]]] = None) -> None:
        self._now = now
        self._window_s = window_s
        self._cond = threading.Condition()
        self._latest: dict[str, JointReading] = {}
        self._diffs: dict[str, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=400))
        # per joint, (receipt time on this machine's clock s, position): every reading, for
        # whoever asks whether the joints are at rest (the black box's after-window)
        self._recent: dict[str, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=RECENT_KEEP))
        names = names or {}
        self._node = node
        #: called with (names, positions, header stamp, receipt time, velocities) for every
        #: message, in the spinning thread (the execution watch); must be quick. Set before
        #: subscribing: the node is already spun, a message can come at once
        self.listener: Optional[Callable[[Sequence[str], Sequence[float], float, float,
                                          Sequence[float]], None]] = None
        #: called with (topic, the message's bytes as DDS delivered them, receipt time in ns
        #: of this machine's clock, its header's stamp in s) for every message, before it is
        #: read (the black box's ring); must be quick. The subscriptions take the bytes and deserialize them here: one
        #: subscription per topic serves both (another on the same node would cost every spin
        #: of its executor, 500 times a second on a simulator's joint states)
        self.raw_sink: Optional[Callable[[str, bytes, int, float], None]] = None
        self._subs = [node.create_subscription(
            JointState, topic, _taking_info(self._raw(topic, self._on_msg
                                                      if not _renames(names.get(topic)) else
                                                      functools.partial(self._on_renamed,
                                                                        dict(names[topic])))),
            50, raw=True)
            for topic in sorted(set(topics))]

    def _raw(self, topic: str, handler: Callable) -> Callable:
        def on_bytes(data: bytes, info: Optional[Mapping] = None) -> None:
            t_ns = time.time_ns()
            msg = deserialize_message(data, JointState)
            sink = self.raw_sink
            if sink is not None:
                sink(topic, data, t_ns, msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
            handler(msg, info)
        return on_bytes

    def _on_renamed(self, model_names: Mapping[str, str], msg: JointState,
                    info: Optional[Mapping] = None) -> None:
        msg.name = [model_names.get(n, n) for n in msg.name]
        self._on_msg(msg, info)

    def _on_msg(self, msg: JointState, info: Optional[Mapping] = None) -> None:
        received = self._now()
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        # the offset sample's receipt time: the middleware's where it is on this clock
        wire_sys = ((info or {}).get("received_timestamp") or 0) * 1e-9
        wire = wire_sys if abs(wire_sys - received) < SAME_CLOCK_S else received
        # how late this process reads it (s, system clock; 0: not known or not needed)
        arrived = time.time()
        late = max(0.0, arrived - wire_sys) if wire_sys and wire is received else 0.0
        with self._cond:
            for k, name in enumerate(msg.name):
                if k < len(msg.position):
                    self._latest[name] = JointReading(float(msg.position[k]), stamp, received)
                    self._recent[name].append((arrived, float(msg.position[k])))
                    # On sim time this process's clock reads 0 until its first /clock: a
                    # message received then says nothing about the offset (0 - stamp would
                    # read as the controller's clock being ahead by its whole stamp, and stay
                    # in the window for the first window_s of sim time).
                    if received > 0:
                        self._diffs[name].append((received, wire - stamp, late))
            self._cond.notify_all()
        listener = self.listener
        if listener is not None:
            listener(msg.name, msg.position, stamp, received, msg.velocity)

    def readings(self, joints: Sequence[str]) -> Optional[dict[str, JointReading]]:
        """The latest reading of every joint, or None while one has none."""
        with self._cond:
            if not all(j in self._latest for j in joints):
                return None
            return {j: self._latest[j] for j in joints}

    def motion(self, joints: Sequence[str], window_s: float) -> Optional[RecentMotion]:
        """How far ``joints`` moved over the last ``window_s`` of their readings (every reading
        received, by this machine's clock at receipt, from the one at or before the stretch's
        start to the newest; per joint its own newest); None while one has no reading."""
        now = time.time()
        with self._cond:
            if not all(self._recent.get(j) for j in joints):
                return None
            kept = [self._recent[j] for j in joints]
            age = now - min(k[-1][0] for k in kept)   # any joint's stream stalled shows
            spread = 0.0
            for readings in kept:
                start = readings[-1][0] - window_s
                if readings[0][0] > start:   # not kept back that far yet
                    return RecentMotion(None, age)
                lo = hi = readings[-1][1]
                for t, q in reversed(readings):
                    lo, hi = min(lo, q), max(hi, q)
                    if t <= start:
                        break
                spread = max(spread, hi - lo)
        return RecentMotion(spread, age)

    def received(self, joints: Sequence[str]) -> dict[str, float]:
        """Receipt time (s) of the latest reading of each of ``joints`` that has one."""
        with self._cond:
            return {j: self._latest[j].received for j in joints if j in self._latest}

    def wait_for(self, joints: Sequence[str], timeout: float,
                 stop: Callable[[], bool] = lambda: False) -> Optional[dict[str, JointReading]]:
        """Wait (wall clock, bounded) until every joint has a reading; None on timeout or stop."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(j in self._latest for j in joints):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or stop():
                    return None
                self._cond.wait(min(remaining, 0.05))
            return {j: self._latest[j] for j in joints}

    def wait_stamped(self, joints: Sequence[str], since: float, timeout: float,
                     stop: Callable[[], bool] = lambda: False
                     ) -> Optional[dict[str, JointReading]]:
        """Wait (wall clock, bounded) until every joint's latest reading is stamped at
        ``since`` or later (s, the controllers' clock): measured after that moment, not read
        late from a backlog. None on timeout or stop."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                latest = {j: self._latest.get(j) for j in joints}
                if all(r is not None and r.stamp >= since for r in latest.values()):
                    return latest
                remaining = deadline - time.monotonic()
                if remaining <= 0 or stop():
                    return None
                self._cond.wait(min(remaining, 0.05))

    def clock_offset(self, joints: Sequence[str], min_samples: int = 10,
                     min_span_s: float = 0.25) -> Optional[float]:
        """Estimated offset (s) of the clock that stamps these joints' messages against this
        process's clock (positive: the controller's clock is ahead), from the messages received
        in the last ``window_s``; None until they number ``min_samples`` and span ``min_span_s``
        of receipt time (the first messages after a subscription matches can arrive in a late
        burst, which alone would read as an offset)."""
        now = self._now()
        with self._cond:
            rows = [(r, d) for j in joints for (r, d, late) in self._diffs.get(j, ())
                    if now - r <= self._window_s and late <= READ_LATE_S]
        received = sorted({r for r, _ in rows})   # messages, not joint rows
        if len(received) < min_samples:
            return None
        if received[-1] - received[0] < min_span_s:
            return None
        return -float(min(d for _, d in rows))

    def offset_shortfall(self, joints: Sequence[str], min_samples: int = 10,
                         min_span_s: float = 0.25) -> str:
        """Why :meth:`clock_offset` has no estimate for ``joints`` now, in words: no clock yet
        (sim time before the first ``/clock``), joints never reported, or too few messages in
        the window (with the count and span)."""
        now = self._now()
        if now <= 0:
            return "this process's clock reads 0: no /clock message yet (use_sim_time)"
        with self._cond:
            never = [j for j in joints if j not in self._latest]
            rows = [r for j in joints for (r, _, late) in self._diffs.get(j, ())
                    if now - r <= self._window_s and late <= READ_LATE_S]
            read_late = [late for j in joints for (r, _, late) in self._diffs.get(j, ())
                         if now - r <= self._window_s and late > READ_LATE_S]
            # every message of the window received at one clock reading: the clock stood
            held = [r - d for (r, d, _) in self._diffs.get(joints[0], ()) if r == now] \
                if joints and len(set(rows)) == 1 else []
        if never:
            return f"no joint state ever received for {never}"
        if len(held) > 1:
            return (f"{len(held)} joint-state messages arrived while this process's clock stood "
                    f"at {now:.3f} s (their stamps advanced {max(held) - min(held):.3f} s): its "
                    "clock is not advancing (on sim time: /clock stopped arriving, or this "
                    "process stopped handling it)")
        received = sorted(set(rows))
        span = received[-1] - received[0] if received else 0.0
        late = (f"; {len(read_late)} more read over {READ_LATE_S * 1e3:.0f} ms after they "
                f"arrived (up to {max(read_late) * 1e3:.0f} ms: a backlog in this process, which "
                "would read as the controller's clock being behind)") if read_late else ""
        return (f"{len(received)} joint-state message(s) in the last {self._window_s:g} s "
                f"spanning {span:.3f} s (need {min_samples} spanning {min_span_s:g} s){late}")

    def rate(self, joints: Sequence[str]) -> float:
        """Messages per second carrying any of ``joints``, over the last ``window_s``."""
        now = self._now()
        with self._cond:
            times = {r for j in joints for (r, _, _) in self._diffs.get(j, ())
                     if now - r <= self._window_s}
        return len(times) / self._window_s

    def stamp_lag(self, joints: Sequence[str]) -> float:
        """How far (s, >= 0) the latest joint state of any of ``joints`` was stamped behind its
        receipt: the lag of the slowest controller clock now, transport latency included (a
        change stamped one start lead after the controllers' now, this clock's now less the
        lag, leaves them the lead less that latency). 0 while none has been received. Unlike :meth:`clock_offset` (the best case over
        a window, for the start check) this is the current figure: a controller whose clock
        fell behind mid-run (a starved simulator catching up) reads as behind at once."""
        with self._cond:
            lags = [self._diffs[j][-1][1] for j in joints if self._diffs.get(j)]
        return max([0.0, *lags])

    def now(self) -> float:
        return self._now()

    def close(self) -> None:
        for sub in self._subs:
            self._node.destroy_subscription(sub)


def positions(readings: Mapping[str, JointReading], joints: Sequence[str]) -> np.ndarray:
    return np.array([readings[j].position for j in joints])


def _renames(names: Optional[Mapping[str, str]]) -> bool:
    return bool(names) and any(k != v for k, v in names.items())
