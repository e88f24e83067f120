"""/joint_states messages kept for a bring-up session, in numpy, in header-stamp order (ROS-free).

The HIL session (``hil/session.py``) appends every message it receives and asks for windows:
``samples(since=...)`` (the messages stamped since an instant, as :class:`JointSamples`) and
``latest(joints)`` (the latest positions of an arm). Their cost is proportional to the window,
not to the session's length:

- rows are stored sorted by header stamp (stable: equal stamps keep their arrival order), in
  preallocated numpy blocks that grow by doubling. Messages arrive mostly in stamp order, so a
  row is appended at the end; one stamped earlier than the latest is inserted where it belongs
  (moving only the rows stamped after it). A window ``since=t`` is a bisection and a slice.
- every distinct joint name gets a column once (first-seen order); every distinct name tuple
  maps to its columns once. A message fills one row: NaN where it carries no joint; velocities
  zero when it carries none, efforts NaN when it carries none or not one per name.
- the rows are kept ``keep_s`` seconds of this machine's monotonic clock after their arrival
  (at least; dropped in batches), except while a :meth:`hold` is on (a run whose window must
  stay whole however long it lasts). A window that reaches back past a dropped row raises
  :class:`JointStateHistoryError` instead of silently missing its beginning.

A window's joint names are those of its own messages, in the order their messages arrived (the
first message carrying a name places it), as the session's buffer always gave them.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import Iterator, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.errors import (ConfigError, JointStateHistoryError,
                                            JointStateMessageError)
from mj_manipulator_ros.hil.analysis import JointSamples

#: rows scanned first, from the newest, for an arm's latest message (then 4x more each time)
_LATEST_CHUNK = 64
#: rows are dropped once the oldest kept arrived this many times ``keep_s`` ago (so they are
#: dropped in batches, each row's copy amortised over a quarter window of appends)
_TRIM_SLACK = 1.25


class JointStateRows:
    """Args:
        keep_s: how long a row is kept after its arrival, s of the ``arrived`` clock given to
            :meth:`append` (the session: ``time.monotonic()``); ``math.inf`` keeps every row.
        capacity: rows allocated at first (grows by doubling).

    Thread-safe: one lock around every method.

    Raises:
        ConfigError: ``keep_s`` not positive.
    """

    def __init__(self, keep_s: float = math.inf, capacity: int = 1024) -> None:
        if not keep_s > 0:
            raise ConfigError("settings.joint_states_keep_s: expected a positive number of "
                              f"seconds a joint state is kept, got {keep_s!r}")
        self.keep_s = float(keep_s)
        self._lock = threading.Lock()
        self._columns: dict[str, int] = {}              # name -> column, first seen first
        self._names: list[str] = []                     # column -> name
        self._layouts: dict[tuple, tuple[int, np.ndarray]] = {}   # names -> (id, columns)
        self._layout_names: list[tuple] = []            # id -> names
        self._cap = max(int(capacity), 1)
        self._stamps = np.empty(self._cap)              # s, header stamps, sorted
        self._received = np.empty(self._cap)            # s, receive times
        self._arrived = np.empty(self._cap)             # s, the keep clock
        self._seq = np.empty(self._cap, np.int64)       # arrival number
        self._layout = np.empty(self._cap, np.int32)    # layout id
        self._pos = np.empty((self._cap, 0))
        self._vel = np.empty((self._cap, 0))
        self._eff = np.empty((self._cap, 0))
        self._lo = self._hi = 0                         # the rows are [lo, hi)
        self._next_seq = 0
        self._oldest_arrived = math.inf
        self._holds = 0
        self._dropped = 0
        self._dropped_since_clear = False
        self._dropped_stamp = -math.inf                 # the latest stamp of a dropped row
        self._dropped_received = -math.inf              # the latest receive time of one

    # ---- writing ------------------------------------------------------------------------------
    def append(self, stamp: float, received: float, names: Sequence[str],
               positions: Sequence[float], velocities: Sequence[float] = (),
               efforts: Sequence[float] = (), arrived: float = 0.0) -> None:
        """One message: header ``stamp`` and ``received`` (s), its joint ``names`` and their
        ``positions`` (rad or m, one per name), ``velocities`` (one per name, or none: zeros),
        ``efforts`` (N m or N, one per name; otherwise NaN); ``arrived`` on the keep clock, s.

        Raises:
            JointStateMessageError: not one position per name, or velocities neither empty nor
                one per name; nothing is stored.
        """
        names = tuple(names)
        if len(positions) != len(names) or len(velocities) not in (0, len(names)):
            raise JointStateMessageError(
                f"a joint state stamped {stamp:.6f} s carries {len(names)} name(s) "
                f"{list(names)}, {len(positions)} position(s) and {len(velocities)} "
                "velocity(ies): expected one position per name and one velocity per name or "
                "none; the message is not kept")
        with self._lock:
            layout, cols = self._layout_of(names)
            if self._hi == self._cap:
                self._make_room()
            k = self._slot_for(stamp)
            self._stamps[k], self._received[k], self._arrived[k] = stamp, received, arrived
            self._seq[k], self._layout[k] = self._next_seq, layout
            self._next_seq += 1
            for block in (self._pos, self._vel, self._eff):
                block[k].fill(np.nan)
            self._pos[k, cols] = positions
            self._vel[k, cols] = velocities if len(velocities) else 0.0
            if len(efforts) == len(names):
                self._eff[k, cols] = efforts
            self._oldest_arrived = min(self._oldest_arrived, arrived)
            if self._holds == 0 and arrived - self._oldest_arrived > _TRIM_SLACK * self.keep_s:
                self._trim(arrived - self.keep_s)

    def clear(self) -> None:
        """Forget every row (the joint names and what was dropped are forgotten too)."""
        with self._lock:
            self._lo = self._hi = 0
            self._oldest_arrived = math.inf
            self._dropped_since_clear = False
            self._dropped_stamp = self._dropped_received = -math.inf

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """No row is dropped while this is on (nested holds count)."""
        with self._lock:
            self._holds += 1
        try:
            yield
        finally:
            with self._lock:
                self._holds -= 1

    # ---- reading ------------------------------------------------------------------------------
    def samples(self, since: float = -math.inf, received_since: float = -math.inf) -> JointSamples:
        """The messages stamped at or after ``since`` and received at or after
        ``received_since`` (s), in stamp order (equal stamps: arrival order). Costs the rows
        stamped since ``since`` (``received_since`` alone: one comparison per kept row).

        Raises:
            JointStateHistoryError: a dropped row may belong to the window.
        """
        with self._lock:
            if self._dropped_since_clear and self._dropped_stamp >= since \
                    and self._dropped_received >= received_since:
                raise JointStateHistoryError(
                    f"joint states since stamp {since} s (received since {received_since} s) "
                    f"were asked for, but {self._dropped} row(s) up to stamp "
                    f"{self._dropped_stamp:.3f} s (received up to {self._dropped_received:.3f} "
                    f"s) were dropped: rows are kept {self.keep_s:g} s after their arrival "
                    f"(setting joint_states_keep_s); the kept rows are stamped "
                    f"{self._stamp_span()}")
            k = self._lo + int(np.searchsorted(self._stamps[self._lo:self._hi], since, "left"))
            rows: slice | np.ndarray = slice(k, self._hi)
            if received_since > -math.inf:
                rows = k + np.flatnonzero(self._received[k:self._hi] >= received_since)
            return self._window(rows)

    def latest(self, joints: Sequence[str]) -> Optional[np.ndarray]:
        """Positions (J,) of ``joints`` in the latest-stamped message that carries every one of
        them with a number (not NaN); None if no kept message does. Costs the rows stamped
        after that message."""
        with self._lock:
            cols = [self._columns.get(j) for j in joints]
            if None in cols:
                return None
            end, chunk = self._hi, _LATEST_CHUNK
            while end > self._lo:
                start = max(self._lo, end - chunk)
                whole = ~np.isnan(self._pos[start:end][:, cols]).any(axis=1)
                if whole.any():
                    return self._pos[start + int(np.flatnonzero(whole)[-1]), cols].copy()
                end, chunk = start, chunk * 4
            return None

    def __len__(self) -> int:
        with self._lock:
            return self._hi - self._lo

    @property
    def dropped(self) -> int:
        """Rows dropped so far (older than ``keep_s``)."""
        return self._dropped

    # ---- internals (under the lock) -----------------------------------------------------------
    def _layout_of(self, names: tuple) -> tuple[int, np.ndarray]:
        """The id and columns of a name tuple (new names get columns, first seen first)."""
        known = self._layouts.get(names)
        if known is not None:
            return known
        new = [n for n in dict.fromkeys(names) if n not in self._columns]
        if new:
            for n in new:
                self._columns[n] = len(self._names)
                self._names.append(n)
            pad = np.full((self._cap, len(new)), np.nan)
            self._pos, self._vel, self._eff = (np.hstack([b, pad]) for b in
                                               (self._pos, self._vel, self._eff))
        entry = (len(self._layout_names), np.array([self._columns[n] for n in names], np.intp))
        self._layouts[names] = entry
        self._layout_names.append(names)
        return entry

    def _blocks(self) -> tuple[np.ndarray, ...]:
        return (self._stamps, self._received, self._arrived, self._seq, self._layout,
                self._pos, self._vel, self._eff)

    def _make_room(self) -> None:
        """Room for one more row at the end: the rows moved to the start, or twice the rows."""
        n = self._hi - self._lo
        cap = self._cap if n <= self._cap // 2 else 2 * self._cap
        self._reallocate(cap)

    def _reallocate(self, cap: int) -> None:
        n, lo = self._hi - self._lo, self._lo
        fresh = []
        for block in self._blocks():
            b = np.empty((cap,) + block.shape[1:], block.dtype)
            b[:n] = block[lo:lo + n]
            fresh.append(b)
        (self._stamps, self._received, self._arrived, self._seq, self._layout,
         self._pos, self._vel, self._eff) = fresh
        self._cap, self._lo, self._hi = cap, 0, n

    def _slot_for(self, stamp: float) -> int:
        """The row index a message stamped ``stamp`` goes to (after every row stamped at or
        before it), the rows after it moved up by one; ``hi`` grows by one."""
        lo, hi = self._lo, self._hi
        if hi == lo or stamp >= self._stamps[hi - 1]:
            k = hi
        else:
            k = lo + int(np.searchsorted(self._stamps[lo:hi], stamp, "right"))
            for block in self._blocks():
                block[k + 1:hi + 1] = block[k:hi]
        self._hi = hi + 1
        return k

    def _trim(self, cutoff: float) -> None:
        """Drop the rows that arrived before ``cutoff``."""
        lo, hi = self._lo, self._hi
        keep = self._arrived[lo:hi] >= cutoff
        gone = ~keep
        if gone.any():
            self._dropped += int(gone.sum())
            self._dropped_since_clear = True
            self._dropped_stamp = max(self._dropped_stamp, float(self._stamps[lo:hi][gone].max()))
            self._dropped_received = max(self._dropped_received,
                                         float(self._received[lo:hi][gone].max()))
            n = int(keep.sum())
            for block in self._blocks():
                block[:n] = block[lo:hi][keep]
            self._lo, self._hi = 0, n
            if self._cap > 4 * max(n, 1024):
                self._reallocate(2 * max(n, 1024))
        self._oldest_arrived = float(self._arrived[self._lo:self._hi].min()) \
            if self._hi > self._lo else math.inf

    def _window(self, rows: "slice | np.ndarray") -> JointSamples:
        """The rows as JointSamples: their names in the order their messages arrived."""
        layout, seq = self._layout[rows], self._seq[rows]
        firsts = sorted((int(seq[layout == u].min()), int(u)) for u in np.unique(layout))
        names: list[str] = []
        for _, u in firsts:
            names.extend(n for n in self._layout_names[u] if n not in names)
        cols = [self._columns[n] for n in names]
        if cols == list(range(len(self._names))):
            pick = (lambda b: b[rows].copy()) if isinstance(rows, slice) else (lambda b: b[rows])
        else:
            pick = lambda b: b[rows][:, cols]  # noqa: E731
        return JointSamples(self._stamps[rows].copy(), self._received[rows].copy(), tuple(names),
                            pick(self._pos), pick(self._vel), pick(self._eff), seq.copy())

    def _stamp_span(self) -> str:
        if self._hi == self._lo:
            return "(none kept)"
        return f"{self._stamps[self._lo]:.3f}-{self._stamps[self._hi - 1]:.3f} s"
