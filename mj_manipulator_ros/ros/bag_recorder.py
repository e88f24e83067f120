"""Record a run as a rosbag2 directory with MCAP storage (what ``ros2 bag record -s mcap``
writes): ``metadata.yaml`` + one ``.mcap`` file, readable by ``ros2 bag``, Foxglove, PlotJuggler.

Written with `rosbags <https://pypi.org/project/rosbags/>`_ (maintained, pure Python, writes the
rosbag2 metadata and MCAP layout itself; nothing here encodes the format). Messages are recorded
as the bytes DDS delivered (raw subscriptions: no decode/encode on the way) and stamped with
their receipt time, as ``ros2 bag record`` does.

Threading: the recorder has its own node and spinning thread; :meth:`write` and :meth:`event`
may be called from any thread (one lock around the writer). Nothing runs on the executor's arm
threads: the executor hands over its goals and events after the run.

Topics (see docs/files.md):

- ``/joint_states`` (sensor_msgs/msg/JointState), ``/clock`` (rosgraph_msgs/msg/Clock) where
  present;
- per arm ``<action>/_action/feedback`` (control_msgs/action/FollowJointTrajectory_FeedbackMessage)
  and ``<action>/_action/status`` (action_msgs/msg/GoalStatusArray): the real topics;
- ``/mj_manipulator/<arm>/goal`` (control_msgs/action/FollowJointTrajectory_Goal): each goal as
  sent, at its send time;
- ``/mj_manipulator/events`` (rcl_interfaces/msg/Log): the executor's events (start stamp, goals
  sent and accepted, the first failure, cancels, stop confirmations, results).

A full disk never stops the run: recording stops (the reason kept in :attr:`BagRecorder.error`)
when the free space falls below ``FREE_FLOOR_BYTES`` or a write fails, and at close a reserve
file released for it lets the bag be finished, readable up to there.

Artifacts (plan, configuration, execution report, scene XML, physics step) go into the bag's
``custom_data`` (``metadata.yaml``, and the MCAP ``rosbag2`` metadata record, so the ``.mcap``
file alone carries them too).
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Iterable, Optional

import rclpy
from action_msgs.msg import GoalStatusArray
from control_msgs.action import FollowJointTrajectory
from rcl_interfaces.msg import Log
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile
from rclpy.serialization import serialize_message
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from mj_manipulator_ros.core.clock_map import ClockMap, header_stamp
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.ros.bag_types import BagTypes
from mj_manipulator_ros.ros.spinner import BackgroundSpinner

EVENTS_TOPIC = "/mj_manipulator/events"
#: the MCAP writer's chunk: messages are kept in memory and written this many bytes at a time
CHUNK_BYTES = 1 << 20
#: bytes kept in the bag directory while recording (a file released at close), so that a bag
#: whose disk filled up can still be closed: its last chunk, summary and metadata.yaml written
RESERVE_BYTES = CHUNK_BYTES + (512 << 10)
RESERVE_NAME = ".space_reserve"
#: how long a recording waits for its subscriptions to match the publishers it sees, s
MATCH_WAIT_S = 2.0
#: recording stops (an error, never the run) when the disk's free space falls below this
FREE_FLOOR_BYTES = CHUNK_BYTES + (256 << 10)
#: how often the free space is looked at while writing, s
FREE_CHECK_S = 0.25
#: how far back (s of receipt time) a recording keeps its joint states' (stamp, receipt) pairs
#: to place the executor's events; an event before that is placed from the first pair at the
#: clocks' rate
CLOCK_MAP_S = 60.0
FEEDBACK = FollowJointTrajectory.Impl.FeedbackMessage
TYPE_NAMES = {JointState: "sensor_msgs/msg/JointState", Clock: "rosgraph_msgs/msg/Clock",
              GoalStatusArray: "action_msgs/msg/GoalStatusArray", Log: "rcl_interfaces/msg/Log",
              FEEDBACK: "control_msgs/action/FollowJointTrajectory_FeedbackMessage",
              FollowJointTrajectory.Goal: "control_msgs/action/FollowJointTrajectory_Goal"}


def goal_topic(arm: str) -> str:
    return f"/mj_manipulator/{arm}/goal"


def arm_topics(action: str) -> list[tuple[str, type]]:
    """The real topics of one FollowJointTrajectory action server."""
    return [(f"{action}/_action/feedback", FEEDBACK), (f"{action}/_action/status", GoalStatusArray)]


def event_message(kind: str, text: str, source: str = "executor",
                  stamp_s: Optional[float] = None, level: int = Log.INFO) -> Log:
    """One executor event as :data:`EVENTS_TOPIC` carries it: ``name`` the source (executor or
    an arm), ``function`` the kind, ``msg`` the text, stamped ``stamp_s`` (controllers' clock;
    default this machine's clock now)."""
    msg = Log(level=level, name=f"mj_manipulator/{source}", msg=text, function=kind,
              file="", line=0)
    t = stamp_s if stamp_s is not None else time.time()
    msg.stamp.sec, msg.stamp.nanosec = int(t // 1), int(round((t % 1) * 1e9)) % 1_000_000_000
    return msg


class BagRecorder:
    """Args:
        path: the bag directory to create (must not exist).
        context: the rclpy context to record in.
        topics: (topic, message class) to subscribe to and record.
        written: (topic, message class) written by the owner through :meth:`write`.
        artifacts: name -> text, stored as custom data (more with :meth:`attach`).
        stamped: recorded topics whose messages begin with a header (joint states): their
            (stamp, receipt) pairs go to :attr:`clock_map`.

    Raises:
        ConfigError: ``path`` exists (a bag is never overwritten).
    """

    def __init__(self, path: str | Path, context, topics: Iterable[tuple[str, type]],
                 written: Iterable[tuple[str, type]] = (), artifacts: Optional[dict] = None,
                 stamped: Iterable[str] = ()) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        self.path = Path(path)
        if self.path.exists():
            raise ConfigError(f"record: {self.path} exists; a bag is never overwritten (choose a "
                              "new directory)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"record: cannot create the bag directory {self.path}: "
                              f"{exc.strerror} ({exc.filename})") from None
        types = BagTypes.shared()
        topics, written = list(topics), list(written)
        specs = {}
        for topic, cls in [*topics, *written, (EVENTS_TOPIC, Log)]:
            name = TYPE_NAMES[cls]
            specs.setdefault(topic, (name, types.msgdef(name), types.rihs01(name)))
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        try:
            self._writer.open()
            self._reserve = self.path / RESERVE_NAME
            self._reserve.write_bytes(b"\0" * RESERVE_BYTES)
        except OSError as exc:
            raise ConfigError(f"record: cannot write the bag {self.path}: {exc.strerror}") from None
        self._lock = threading.Lock()
        self._closed = False
        #: the first write or close failure (the recording stops there; the bag keeps what was
        #: written before it); None while every write succeeded
        self.error: Optional[str] = None
        self._next_free_check = 0.0
        #: topic -> publishers not matched when :meth:`wait_matched` gave up
        self.unmatched: dict[str, int] = {}
        self._connections = {topic: self._writer.add_connection(topic, name, msgdef=msgdef,
                                                                rihs01=rihs01)
                             for topic, (name, msgdef, rihs01) in specs.items()}
        self._types = types
        self._type_of = {topic: name for topic, (name, _, _) in specs.items()}
        self.counts: dict[str, int] = {topic: 0 for topic in specs}
        self._artifacts = dict(artifacts or {})
        #: the stamped topics' (stamp, receipt) pairs of the last CLOCK_MAP_S: where events of
        #: the controllers' clock go among them (``core/clock_map.py``)
        self.clock_map = ClockMap(int(CLOCK_MAP_S * 1e9))
        self._stamped = frozenset(stamped)
        self._node = rclpy.create_node(f"mjmr_bag_{abs(hash(str(self.path))) % 10**8}",
                                       context=context)
        qos = QoSProfile(depth=100)
        self._subs = [self._node.create_subscription(cls, topic, self._receiver(topic), qos,
                                                     raw=True)
                      for topic, cls in topics]
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(self._node)
        self._spinner = BackgroundSpinner(executor, "mjmr-bag-recorder").start()

    def wait_matched(self, timeout: float = MATCH_WAIT_S) -> dict[str, int]:
        """Wait (wall clock, bounded) until every recorded topic's subscription has matched each
        publisher the graph shows for it, so that the first messages after this are recorded.
        Returns topic -> publishers seen but not matched at the end (empty when all matched)."""
        deadline = time.monotonic() + timeout
        while True:
            missing = {}
            for sub in self._subs:
                expected = self._node.count_publishers(sub.topic_name)
                matched = sub.get_publisher_count() if hasattr(sub, "get_publisher_count") \
                    else expected
                if matched < expected:
                    missing[sub.topic_name] = expected - matched
            if not missing or time.monotonic() >= deadline:
                self.unmatched = missing
                return missing
            time.sleep(0.01)

    def _receiver(self, topic: str):
        if topic in self._stamped:
            add = self.clock_map.add

            def receive_stamped(data: bytes) -> None:
                t_ns = time.time_ns()
                self._write_bytes(topic, data, t_ns)
                add(header_stamp(data), t_ns)
            return receive_stamped

        def receive(data: bytes) -> None:
            self._write_bytes(topic, data, time.time_ns())
        return receive

    def _write_bytes(self, topic: str, data: bytes, log_time_ns: int) -> None:
        with self._lock:
            if self._closed or self.error is not None:
                return
            now = time.monotonic()
            if now >= self._next_free_check:
                self._next_free_check = now + FREE_CHECK_S
                free = shutil.disk_usage(self.path).free
                if free < FREE_FLOOR_BYTES:
                    self.error = (f"recording stopped: the disk's free space fell to "
                                  f"{free / 1e6:.2f} MB (No space left on device soon; "
                                  f"{FREE_FLOOR_BYTES / 1e6:.2f} MB kept to close the bag)")
                    return
            try:
                self._writer.write(self._connections[topic], int(log_time_ns), bytes(data))
            except OSError as exc:  # a full disk: stop recording, never the caller
                self.error = f"writing {topic} failed: {exc.strerror or exc}"
                return
            self.counts[topic] += 1

    def write(self, topic: str, msg, log_time_ns: Optional[int] = None) -> None:
        """Write a message (rclpy object) on a declared topic (any thread), serialized to its
        exact CDR length (as DDS delivers it)."""
        raw = self._types.exact_cdr(self._type_of[topic], serialize_message(msg))
        self._write_bytes(topic, raw, time.time_ns() if log_time_ns is None else log_time_ns)

    def event(self, kind: str, text: str, source: str = "executor", stamp_s: Optional[float] = None,
              log_time_ns: Optional[int] = None, level: int = Log.INFO) -> None:
        """One executor event on :data:`EVENTS_TOPIC`: ``name`` the source (executor or an
        arm), ``function`` the kind, ``msg`` the text, stamped ``stamp_s`` (controllers' clock)."""
        self.write(EVENTS_TOPIC, event_message(kind, text, source, stamp_s, level), log_time_ns)

    def attach(self, name: str, text: str) -> None:
        """Keep ``text`` in the bag under ``name`` (custom data; written at close)."""
        self._artifacts[name] = str(text)

    def close(self) -> Path:
        """Stop recording and finish the bag; returns its directory. Idempotent."""
        with self._lock:
            if self._closed:
                return self.path
        self._spinner.stop()
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._node.destroy_node()
        with self._lock:
            self._closed = True
            try:   # the reserve makes room for the MCAP summary and metadata.yaml
                self._reserve.unlink(missing_ok=True)
            except OSError:
                pass
            try:
                for name, text in self._artifacts.items():
                    self._writer.set_custom_data(name, text)
                self._writer.close()
            except OSError as exc:
                self.error = self.error or f"closing the bag failed: {exc.strerror or exc}"
        return self.path
