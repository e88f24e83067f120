"""What each arm did once asked to stop, measured on its joint states.

A controlled stop's time and travel are computed from its ramp (``core/report.StopRecord``); a
cancel's are not known in advance: each controller holds where the cancel finds it and the arm
runs on. The executor feeds the meter every joint-state message of the execution. Until a stop
is asked for, only each arm's poses of the last ``HISTORY_S`` are kept; from the first request
(:meth:`StopMeter.start`) on, every message is recorded (at most ``MAX_ROWS``), starting with
the last pose stamped before the request, so that a request whose recording begins late (the
caller read its clock, then joint states came on before it called) is still measured from where
the arm was at the request. After the execution, :meth:`StopMeter.figures` gives, per arm and
its own request time, the largest joint path length from its pose at the request to its last
reported pose (summed message to message, as the controlled stop's predicted travel is: a joint
that turns back counts both ways; sensor noise adds to it), and the time until its last motion
faster than ``STILL_SPEED`` (by finite differences of consecutive complete poses). The executor
keeps listening after the last result until every stopped arm has been still for a moment,
within a bound (``ros/execution_run.py``: ``STOP_SETTLE_S``, ``STOP_OBSERVE_S``): an arm still moving
then is measured that far (``observed_s`` says how far).

Joint states are merged by joint name, as the watch merges them (any subset per message).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.joint_path import joint_travel

#: an arm faster than this on any joint (rad/s or m/s) is moving
STILL_SPEED = 0.02
#: the most messages recorded after the first stop request
MAX_ROWS = 50_000
#: before any stop request: the complete poses of this much stamp time kept per arm (s)...
HISTORY_S = 1.0
#: ... and at most this many
HISTORY_ROWS = 5_000


@dataclass(frozen=True)
class StopFigures:
    """One arm's stop, measured. Times in s from its request (controllers' clock).

    Attributes:
        travel: the largest joint path length from the pose at the request to the last one,
            rad/m.
        time_s: until its last motion faster than ``STILL_SPEED`` (0: it did not move).
        observed_s: until its last joint state recorded.
    """

    travel: float
    time_s: float
    observed_s: float


class StopMeter:
    """Args:
        joints: arm -> its joint names.
    """

    def __init__(self, joints: Mapping[str, Sequence[str]]) -> None:
        self._owner = {j: (arm, k) for arm, names in joints.items() for k, j in enumerate(names)}
        self._size = {arm: len(names) for arm, names in joints.items()}
        self._pose = {arm: np.full(n, np.nan) for arm, n in self._size.items()}
        self._lock = threading.Lock()
        self._started: Optional[float] = None
        self._rows: dict[str, list[tuple[float, np.ndarray]]] = {a: [] for a in joints}
        self._history: dict[str, deque[tuple[float, np.ndarray]]] = {
            a: deque(maxlen=HISTORY_ROWS) for a in joints}
        self._count = 0

    def start(self, at: float) -> None:
        """A stop was asked for at ``at`` (controllers' clock): record from now on, from each
        arm's last complete pose stamped before ``at`` (kept, with those since, from before
        this call). Any thread; the first call counts."""
        with self._lock:
            if self._started is not None:
                return
            self._started = at
            for arm, history in self._history.items():
                rows = list(history)
                first = next((k for k in range(len(rows) - 1, -1, -1) if rows[k][0] < at), 0)
                self._rows[arm] = rows[first:]
                self._count += len(rows) - first
                history.clear()

    def on_joint_state(self, names: Sequence[str], positions: Sequence[float],
                       stamp: float) -> None:
        """A joint-state message (header stamp, s). Any thread."""
        touched = set()
        with self._lock:
            for name, value in zip(names, positions):
                owner = self._owner.get(name)
                if owner is not None:
                    self._pose[owner[0]][owner[1]] = value
                    touched.add(owner[0])
            if self._started is not None and self._count >= MAX_ROWS:
                return
            for arm in touched:
                pose = self._pose[arm]
                if np.isnan(pose).any():
                    continue
                rows = self._rows[arm] if self._started is not None else self._history[arm]
                if rows and rows[-1][0] == stamp:   # the rest of one sample, split: one row
                    rows[-1] = (stamp, pose.copy())
                    continue
                rows.append((stamp, pose.copy()))
                if self._started is not None:
                    self._count += 1
                else:
                    while rows[0][0] < stamp - HISTORY_S:
                        rows.popleft()

    def settled(self, arm: str, requested_at: float, still_for: float) -> bool:
        """Has ``arm`` been reported since ``requested_at`` and still (no motion faster than
        ``STILL_SPEED``) for the last ``still_for`` s of its joint states?"""
        f = self.figures(arm, requested_at)
        return f is not None and f.observed_s - f.time_s >= still_for

    def figures(self, arm: str, requested_at: Optional[float]) -> Optional[StopFigures]:
        """``arm``'s stop asked at ``requested_at``; None when it was not asked or no joint
        state of the arm was recorded from then on."""
        if requested_at is None:
            return None
        with self._lock:
            rows = list(self._rows.get(arm, ()))
        before = [r for r in rows if r[0] < requested_at]
        after = [r for r in rows if r[0] >= requested_at]
        if not after:
            return None
        first = after[0][1]
        if before:   # the pose at the request: between the messages either side of it
            (t0, q0), (t1, q1) = before[-1], after[0]
            first = q0 if t1 <= t0 else \
                q0 + (q1 - q0) * (requested_at - t0) / (t1 - t0)
        stamps = np.array([r[0] for r in after])
        poses = np.array([r[1] for r in after])
        path = np.vstack([first[None], poses])
        travel = joint_travel(path)
        moving_until = 0.0
        if len(after) > 1:
            dt = np.diff(stamps)
            ok = dt > 0
            speed = np.max(np.abs(np.diff(poses, axis=0)), axis=1)[ok] / dt[ok]
            fast = np.flatnonzero(speed > STILL_SPEED)
            if fast.size:
                moving_until = float(stamps[1:][ok][fast[-1]] - requested_at)
        return StopFigures(travel, moving_until, float(stamps[-1] - requested_at))
