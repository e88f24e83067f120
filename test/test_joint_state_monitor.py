"""The joint-state monitor is ready for a message the moment it subscribes: its node is
already spun elsewhere, and a message may be delivered before the constructor returns (real
rclpy node, real JointState; the delivery is made at once by the node's subscribe call)."""

from __future__ import annotations

import time

import rclpy
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from mj_manipulator_ros.ros.joint_state_monitor import WITH_MESSAGE_INFO, JointStateMonitor


class DeliversAtOnce:
    """A real node whose subscriptions are handed one message as they are made (what a node
    already being spun can do before the subscriber's next line runs)."""

    def __init__(self, node) -> None:
        self.node = node

    def create_subscription(self, msg_type, topic, callback, qos, raw=False):
        sub = self.node.create_subscription(msg_type, topic, callback, qos, raw=raw)
        msg = JointState(name=["a", "b"], position=[0.1, 0.2])
        msg.header.stamp.sec = 7
        if raw:   # what rclpy hands a raw subscription: the serialized message
            msg = serialize_message(msg)
        callback(msg, {}) if WITH_MESSAGE_INFO else callback(msg)
        return sub


def test_a_message_delivered_while_subscribing_is_read(ros) -> None:
    """(regression: the listener attribute was set after subscribing; a message in between
    raised AttributeError in the spinning thread, seen in a HIL rehearsal on a loaded machine)"""
    node = rclpy.create_node("monitor_at_once", context=ros.context)
    try:
        monitor = JointStateMonitor(DeliversAtOnce(node), ["/at_once/joint_states"],
                                    now=time.time)
        readings = monitor.readings(["a", "b"])
        assert readings is not None and readings["b"].position == 0.2 and \
            readings["a"].stamp == 7.0, readings
    finally:
        node.destroy_node()


def test_a_clock_that_falls_behind_mid_stream_reads_as_behind_at_once(ros) -> None:
    """Over real DDS: a controller stamping its states on time, then 80 ms behind (a starved
    simulator). ``stamp_lag`` (what a controlled stop's lead-in is sized by) reads the lag from
    the first late message; ``clock_offset`` (the start check's best case over its window) does
    not, which is why the lead-in must not use it."""
    from rclpy.executors import SingleThreadedExecutor

    from mj_manipulator_ros.ros.spinner import BackgroundSpinner

    node = rclpy.create_node("monitor_lag", context=ros.context)
    pub_node = rclpy.create_node("monitor_lag_pub", context=ros.context)
    clock = node.get_clock()
    now = lambda: clock.now().nanoseconds * 1e-9   # noqa: E731
    monitor = JointStateMonitor(node, ["/lagging/joint_states"], now=now)
    pub = pub_node.create_publisher(JointState, "/lagging/joint_states", 10)
    spin = SingleThreadedExecutor(context=ros.context)
    spin.add_node(node)
    spinner = BackgroundSpinner(spin, "monitor_lag").start()

    def publish(behind_s: float, n: int) -> None:
        for _ in range(n):
            ns = clock.now().nanoseconds - int(behind_s * 1e9)
            msg = JointState(name=["a"], position=[0.0])
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, 10**9)
            pub.publish(msg)
            time.sleep(0.01)

    try:
        deadline = time.monotonic() + 10.0
        while monitor.clock_offset(["a"]) is None and time.monotonic() < deadline:
            publish(0.0, 10)
        on_time = monitor.stamp_lag(["a"])
        assert monitor.clock_offset(["a"]) is not None, monitor.offset_shortfall(["a"])
        assert on_time < 0.02, f"on time, yet read {on_time * 1e3:.1f} ms behind"
        publish(0.08, 5)
        time.sleep(0.05)
        lag, offset = monitor.stamp_lag(["a"]), monitor.clock_offset(["a"])
        assert 0.08 <= lag < 0.08 + 0.05, f"80 ms behind, read {lag * 1e3:.1f} ms"
        assert offset is not None and offset > -0.02, \
            f"the window's best case read {offset * 1e3:.1f} ms (premise)"
        assert monitor.stamp_lag(["not_published"]) == 0.0
    finally:
        spinner.stop()
        monitor.close()
        node.destroy_node()
        pub_node.destroy_node()
