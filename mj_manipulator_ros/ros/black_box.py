"""The black box: the last seconds of everything the arms said, always kept, written on a failure.

While the executor lives, the black box keeps in memory (:class:`Ring`) the last
``execution.black_box_s`` seconds of the arms' joint states (the bytes DDS delivered, handed
over by the executor's monitor), each arm's action feedback (handed over by the arm's thread)
and the simulator's ``/diagnostics`` where one publishes them, bounded by
``execution.black_box_max_mb``; it adds no subscription to what the executor has (each would
slow the arms' cancels: :class:`BlackBox`). When an execution fails,
is stopped or canceled after a goal was sent, :meth:`BlackBox.dump` names the file at once (the
report carries it) and a writer thread records on until every arm of the plan is at rest (or
``execution.black_box_after_s``), then writes the window from ``black_box_s`` before the failure
to there, with the executor's goals and events (:func:`run_messages`), the plan, configuration
and report inside, as one rosbag2 MCAP file (written while no execution is in motion,
:meth:`BlackBox.in_motion`: the next execution's arm threads never wait behind it for the GIL;
at most ``WRITE_DEFER_S`` later) (``ros/bag_file.py``: synced chunk by chunk, so a
cut file is readable up to the cut), and deletes its own files beyond the newest
``execution.black_box_keep``.

Topics in the file: those of ``ros/bag_recorder.py`` (``--record``) but the goals' status
(its events say when each goal was sent, accepted, canceled and how it ended), plus
``/diagnostics``.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import gc
import itertools
import os
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from control_msgs.action import FollowJointTrajectory
from rcl_interfaces.msg import Log
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from mj_manipulator_ros.core.clock_map import ClockMap
from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import ExecutionReport
from mj_manipulator_ros.ros.bag_file import BagFile
from mj_manipulator_ros.ros.bag_recorder import (
    EVENTS_TOPIC, FEEDBACK, TYPE_NAMES, event_message, goal_topic)
from mj_manipulator_ros.ros.bag_types import BagTypes
from mj_manipulator_ros.ros.execution_recording import config_text, plan_text, run_messages
from mj_manipulator_ros.ros.joint_state_monitor import RecentMotion
from mj_manipulator_ros.ros.spinner import BackgroundSpinner

DIAGNOSTICS = "/diagnostics"
DIAGNOSTICS_TYPE = "diagnostic_msgs/msg/DiagnosticArray"
#: bytes a kept message costs besides its data (tuple, int, bytes object headers)
PER_MESSAGE_BYTES = 120
#: the file names the black box writes (and the only files it deletes)
PREFIX, SUFFIX = "blackbox_", ".mcap"
#: an arm is at rest when no joint of it moved more than this (rad or m) over REST_WINDOW_S
REST_TOLERANCE = 1e-4
REST_WINDOW_S = 0.1
#: joint states not refreshed for this long (s): rest cannot be seen, the writer stops waiting
STALE_S = 0.5
#: the longest a file waits for no execution to be in motion before it is written anyway, s
WRITE_DEFER_S = 30.0
#: messages written between two looks at whether an execution began meanwhile
WRITE_BATCH = 100
#: the writer thread's join beyond black_box_after_s and WRITE_DEFER_S, s (writing ~10 s of
#: messages: ~0.1 s)
WRITE_JOIN_S = 10.0


class _CollectorPause:
    """CPython's automatic cyclic collection off while a file is written (its records and
    indexes are many short-lived objects: their churn would set off full collections, which
    stop every thread, at random moments of the next execution: measured as the 4-arm
    peer-cancel p99 2.8x with the writing against 1.02x without; the writing itself makes no
    cycles, freed by reference counts). Process-wide and counted: the collector is back on
    when the last writer ends, as it was before the first."""

    _lock = threading.Lock()
    _count = 0
    _was_enabled = True

    def __init__(self) -> None:
        with _CollectorPause._lock:
            if _CollectorPause._count == 0:
                _CollectorPause._was_enabled = gc.isenabled()
                gc.disable()
            _CollectorPause._count += 1
        self._ended = False

    def end(self) -> None:
        with _CollectorPause._lock:
            if self._ended:
                return
            self._ended = True
            _CollectorPause._count -= 1
            if _CollectorPause._count == 0 and _CollectorPause._was_enabled:
                gc.enable()


def default_directory() -> Path:
    """``$ROS_HOME/mj_manipulator_ros/black_box`` (``$ROS_HOME``: ``~/.ros`` when unset)."""
    home = os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
    return Path(home) / "mj_manipulator_ros" / "black_box"


class Ring:
    """The kept messages: receipt time (ns), topic, bytes, oldest first, at most ``window_ns``
    older than the newest (or than a pinned time, whichever is older) and ``max_bytes`` in all.
    Any thread. Three parallel queues, no object per message that the cyclic collector tracks
    (a tuple per message, 500 a second kept 10 s, set off its full collections, which stop
    every thread)."""

    def __init__(self, window_ns: int, max_bytes: int) -> None:
        self.window_ns = window_ns
        self.max_bytes = max_bytes
        self._times: collections.deque = collections.deque()
        self._topics: collections.deque = collections.deque()
        self._data: collections.deque = collections.deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self._pins: list[int] = []
        #: messages dropped to stay within max_bytes, in all
        self.dropped = 0
        #: the first message's receipt time, ns (None before one came): the ring holds a whole
        #: window once ``window_ns`` has passed since
        self.first_ns: Optional[int] = None

    def add(self, t_ns: int, topic: str, data: bytes) -> None:
        with self._lock:
            if self.first_ns is None:
                self.first_ns = t_ns
            times, data_q = self._times, self._data
            times.append(t_ns)
            self._topics.append(topic)
            data_q.append(data)
            self._bytes += len(data) + PER_MESSAGE_BYTES
            cutoff = t_ns - self.window_ns
            if self._pins:
                cutoff = min(cutoff, min(self._pins))
            while times and (times[0] < cutoff or self._bytes > self.max_bytes):
                if times[0] >= cutoff:
                    self.dropped += 1
                times.popleft()
                self._topics.popleft()
                self._bytes -= len(data_q.popleft()) + PER_MESSAGE_BYTES

    def pin(self, t_ns: int) -> None:
        """Keep every message from ``t_ns`` on (within max_bytes) until :meth:`unpin`."""
        with self._lock:
            self._pins.append(t_ns)

    def unpin(self, t_ns: int) -> None:
        with self._lock:
            self._pins.remove(t_ns)

    def since(self, t_ns: int) -> list[tuple[int, str, bytes]]:
        """The kept messages received at ``t_ns`` or later, oldest first, as (time, topic,
        bytes)."""
        with self._lock:
            first = bisect.bisect_left(self._times, t_ns)
            return list(zip(itertools.islice(self._times, first, None),
                            itertools.islice(self._topics, first, None),
                            itertools.islice(self._data, first, None)))

    @property
    def nbytes(self) -> int:
        """The memory the kept messages count for, bytes."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._times)


class BlackBox:
    """Args:
        node: a node of the executor's (its context is the black box's: its own node for
            ``/diagnostics`` is made in it).
        config: the executor configuration (topics; ``execution.black_box_*``).
        motion: (joint names, a stretch in s) -> how far they moved over the latest stretch
            of their readings, or None while one has none (``JointStateMonitor.motion``): how
            the writer sees the arms come to rest.
    """

    def __init__(self, node, config: ExecutorConfig,
                 motion: Callable[[Sequence[str], float], Optional[RecentMotion]]) -> None:
        s = config.execution
        self.config = config
        self.directory = Path(s.black_box_dir) if s.black_box_dir else default_directory()
        self.ring = Ring(int(s.black_box_s * 1e9), int(s.black_box_max_mb * 1e6))
        #: the joint states' (stamp, receipt) pairs: where the executor's events (times of the
        #: controllers' clock) go among them in the file
        self.clock_map = ClockMap(self.ring.window_ns + int(s.black_box_after_s * 1e9))
        self._motion = motion
        # Nothing here subscribes to what the executor receives already: every subscription
        # more in this process costs the arms' cancels (measured, bench/black_box_bench.py: a
        # status subscription's callback woken by the very status a cancel publishes, and every
        # entity more on the executor's node each of its spins, 500 a second on a simulator's
        # joint states). The joint states come from the executor's monitor (its subscriptions
        # hand over their bytes: JointStateMonitor.raw_sink -> keep), the feedback from the
        # arms' threads (ArmRun.keep_feedback -> keep_feedback); the goals' status is not kept
        # (the events say when each goal was sent, accepted, canceled and how it ended). Only
        # /diagnostics (once a second) on a node and thread of the black box's own.
        self.topics: dict[str, str] = {t: TYPE_NAMES[JointState] for t in dict.fromkeys(
            a.joint_states_topic for a in config.arms)}
        self._feedback_topic = {a.name: f"{a.action_name}/_action/feedback" for a in config.arms}
        self.topics.update({t: TYPE_NAMES[FEEDBACK] for t in self._feedback_topic.values()})
        subscribed = []
        try:
            from diagnostic_msgs.msg import DiagnosticArray
            subscribed.append((DIAGNOSTICS, DiagnosticArray))
            self.topics[DIAGNOSTICS] = DIAGNOSTICS_TYPE
        except ImportError:   # no diagnostics interface installed: no simulator here either
            pass
        for arm in config.arms:
            self.topics[goal_topic(arm.name)] = TYPE_NAMES[FollowJointTrajectory.Goal]
        self.topics[EVENTS_TOPIC] = TYPE_NAMES[Log]
        self._node = rclpy.create_node(f"mjmr_black_box_{uuid.uuid4().hex[:6]}",
                                       context=node.context)
        qos = QoSProfile(depth=100)
        self._subs = [self._node.create_subscription(cls, topic, self._receiver(topic), qos,
                                                     raw=True)
                      for topic, cls in subscribed]
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(self._node)
        self._spinner = BackgroundSpinner(executor, "mjmr-black-box-topics").start()
        self._writer: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._running = 0         # executions in motion (in_motion)
        self._closing = False
        #: the latest file named by :meth:`dump`, and what became of it (None: written, or
        #: still being written; else why it was not written whole)
        self.last_path: Optional[Path] = None
        self.last_error: Optional[str] = None
        #: how the latest dump's wait for rest ended (said in its file's events too)
        self.last_rest: str = ""

    def keep(self, topic: str, data: bytes, t_ns: int, stamp_s: Optional[float] = None) -> None:
        """Keep one message received elsewhere (the executor's joint-state monitor) at ``t_ns``
        (ns, this machine's clock); ``stamp_s``: its header's stamp (s, controllers' clock)."""
        self.ring.add(t_ns, topic, data)
        if stamp_s is not None:
            self.clock_map.add(stamp_s, t_ns)

    def keep_feedback(self, arm: str, msg) -> None:
        """Keep one arm's feedback message (rclpy's, in the arm's thread): serialized here, cut
        to its exact length when written."""
        self.ring.add(time.time_ns(), self._feedback_topic[arm], serialize_message(msg))

    def _receiver(self, topic: str):
        add = self.ring.add

        def receive(data: bytes) -> None:
            add(time.time_ns(), topic, data)
        return receive

    def hold(self) -> int:
        """From now until :meth:`release` (or the :meth:`dump` given it), the ring keeps every
        message from one window before now (an execution begins: whenever it fails, the
        window before the failure is still there). Returns the hold's token."""
        token = time.time_ns() - self.ring.window_ns
        self.ring.pin(token)
        return token

    def release(self, token: int) -> None:
        self.ring.unpin(token)

    def dump(self, report: ExecutionReport, plan: MultiArmPlan, runs: Mapping, now: float,
             failed_ago_s: float, held: Optional[int] = None, rate: float = 1.0) -> Path:
        """Write the black box for this execution: returns the file it is being written to
        (a writer thread waits for rest, then writes; :meth:`wait_written`).

        Args:
            report: the execution's report (kept in the file).
            plan: the plan that ran (kept in the file; its arms are the ones waited for).
            runs: arm -> its ArmRun (the goals as sent).
            now: the controllers' clock now, s.
            failed_ago_s: how long ago (s, this machine's clock) the first failure was
                recorded: the window reaches ``black_box_s`` before it.
            held: the execution's :meth:`hold`, released once the file is written.
            rate: seconds of the controllers' clock per second of this machine's (sim time at
                another pace), to place the failure among the events (and events beyond the
                joint states' stamps, :class:`ClockMap`).
        """
        self.wait_written(self._join_s())   # one file at a time, in order
        wall_ns = time.time_ns()
        failed_ns = wall_ns - int(failed_ago_s * 1e9)
        to_receipt = self.clock_map.mapper(now, wall_ns, rate)
        # the window reaches black_box_s before the failure by this machine's clock and
        # before where its events land in the file (placed through the joint states' stamps:
        # a stale reading of the controllers' clock places them earlier: a 50 ms stale one
        # left the window 52 ms short of the file's failure event, test_black_box)
        moments = [now - failed_ago_s * rate] + [r.requested_at for r in report.stops[:1]]
        if report.first_failure is not None and report.first_failure.evidence_at is not None:
            moments.append(report.first_failure.evidence_at)
        start_ns = min([failed_ns, *(to_receipt(t) for t in moments)]) - self.ring.window_ns
        self.ring.pin(start_ns)
        if held is not None:
            self.ring.unpin(held)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
        path = self.directory / f"{PREFIX}{stamp}_{report.status.value}{SUFFIX}"
        report = dataclasses.replace(report, black_box_path=str(path))
        written = run_messages(report, runs, now, now - failed_ago_s * rate, rate, to_receipt)
        joints = [j for a in plan.arm_names for j in self.config.arm(a).joint_names]
        artifacts = {"plan": plan_text(plan), "config": config_text(self.config)}
        with self._lock:
            self.last_path, self.last_error, self.last_rest = path, None, ""
            self._writer = threading.Thread(
                target=self._write, args=(path, start_ns, written, joints, artifacts, report),
                name="mjmr-black-box", daemon=True)
            self._writer.start()
        return path

    def _join_s(self) -> float:
        return self.config.execution.black_box_after_s + WRITE_DEFER_S + WRITE_JOIN_S

    def _write(self, path: Path, start_ns: int, written: list, joints: list[str],
               artifacts: dict, report: ExecutionReport) -> None:
        window_ns = start_ns
        try:
            rest = self._wait_rest(joints)
            self.last_rest = rest
            kept = self.ring.since(start_ns)
            self.ring.unpin(start_ns)
            start_ns = None
            # the file is written while no execution runs (an arm's thread waiting for the
            # GIL behind this one's would be a slower cancel), for at most WRITE_DEFER_S
            deadline = time.monotonic() + WRITE_DEFER_S
            self._wait_idle(deadline)
            types = BagTypes.shared()
            extra = [(t, topic, types.exact_cdr(self.topics[topic], serialize_message(msg)))
                     for topic, msg, t in written]
            note = event_message("black_box", f"{rest}; window from {window_ns * 1e-9:.3f} s "
                                 f"(unix time), {len(kept)} messages kept, "
                                 f"{self.ring.dropped} dropped in all to stay within "
                                 f"{self.ring.max_bytes / 1e6:.0f} MB", level=Log.INFO)
            extra.append((time.time_ns(), EVENTS_TOPIC, types.exact_cdr(
                self.topics[EVENTS_TOPIC], serialize_message(note))))
            padded = set(self._feedback_topic.values())
            bag = BagFile(path, self.topics, artifacts)
            paused = _CollectorPause()
            try:
                for k, (t, topic, data) in enumerate(sorted(kept + extra,
                                                            key=lambda m: m[0])):
                    if k % WRITE_BATCH == 0:   # the collector back on while it waits
                        paused.end()
                        self._wait_idle(deadline)
                        paused = _CollectorPause()
                    if topic in padded:   # rclpy's serialization: padding after the message
                        data = types.exact_cdr(self.topics[topic], data)
                    bag.write(topic, t, data)
                bag.attach("report", report.to_json())
            finally:
                paused.end()
                bag.close()
            self._rotate()
        except Exception as exc:  # noqa: BLE001 - a thread: kept for the caller to read
            self.last_error = f"{type(exc).__name__}: {exc}"
        finally:
            if start_ns is not None:
                self.ring.unpin(start_ns)

    @contextlib.contextmanager
    def in_motion(self):
        """Around an execution's run (its goals out until its stops confirmed): a file being
        written waits (at most WRITE_DEFER_S from when it could be written)."""
        with self._idle:
            self._running += 1
        try:
            yield
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def _wait_idle(self, deadline: float) -> None:
        with self._idle:
            while self._running and not self._closing:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._idle.wait(min(left, 0.1))

    def _wait_rest(self, joints: Sequence[str]) -> str:
        """Wait (this machine's clock, at most ``black_box_after_s``) until no joint of
        ``joints`` moved more than REST_TOLERANCE over the last REST_WINDOW_S of its readings
        (every reading received: the ones the file ends with; not two samples of them, which
        a loaded machine's late polls spaced less than the window apart in the arm's time, and
        a joint still settling passed). Says how it ended."""
        bound = self.config.execution.black_box_after_s
        t0 = time.monotonic()
        while True:
            now = time.monotonic()
            motion = self._motion(joints, REST_WINDOW_S)
            if motion is None:
                return "rest not seen: no joint states of every joint of the plan's arms"
            if motion.age_s > STALE_S:
                return (f"rest not seen: joint states stopped arriving "
                        f"({motion.age_s:.2f} s without one)")
            if motion.spread is not None and motion.spread <= REST_TOLERANCE:
                return f"every arm at rest {now - t0:.3f} s after the execution ended"
            if now - t0 >= bound:
                return (f"not every arm at rest {bound:g} s after the execution ended "
                        "(execution.black_box_after_s): the file ends there")
            time.sleep(0.01)

    def _rotate(self) -> None:
        keep = self.config.execution.black_box_keep
        own = sorted(p for p in self.directory.glob(f"{PREFIX}*{SUFFIX}") if p.is_file())
        for old in own[:-keep]:
            try:
                old.unlink()
            except OSError:
                pass

    def wait_written(self, timeout: float) -> bool:
        """Wait (bounded) until the latest file is written; True when no writer is left."""
        with self._lock:
            writer = self._writer
        if writer is None:
            return True
        writer.join(timeout)
        return not writer.is_alive()

    def close(self) -> None:
        """Finish the file being written (bounded), then stop keeping messages."""
        with self._idle:
            self._closing = True
            self._idle.notify_all()
        self.wait_written(self._join_s())
        self._spinner.stop()
        self._node.destroy_node()
        self._subs = []
