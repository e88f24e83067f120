"""The joint-state monitor is ready for a message the moment it subscribes: its node is
already spun elsewhere, and a message may be delivered before the constructor returns (real
rclpy node, real JointState; the delivery is made at once by the node's subscribe call)."""

from __future__ import annotations

import time

import rclpy
from sensor_msgs.msg import JointState

from mj_manipulator_ros.ros.joint_state_monitor import WITH_MESSAGE_INFO, JointStateMonitor


class DeliversAtOnce:
    """A real node whose subscriptions are handed one message as they are made (what a node
    already being spun can do before the subscriber's next line runs)."""

    def __init__(self, node) -> None:
        self.node = node

    def create_subscription(self, msg_type, topic, callback, qos):
        sub = self.node.create_subscription(msg_type, topic, callback, qos)
        msg = JointState(name=["a", "b"], position=[0.1, 0.2])
        msg.header.stamp.sec = 7
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
