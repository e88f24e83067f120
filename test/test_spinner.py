"""The background spin thread outlives a callback that raises: it logs it, keeps serving the
node (its clock and its other callbacks), and keeps the error for its owner."""

from __future__ import annotations

import logging
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import Int32

from mj_manipulator_ros.ros.spinner import BackgroundSpinner


def test_a_callback_that_raises_does_not_stop_the_spin_thread(ros, caplog) -> None:
    node = rclpy.create_node("spinner_victim", context=ros.context)
    pub_node = rclpy.create_node("spinner_publisher", context=ros.context)
    pub = pub_node.create_publisher(Int32, "/spinner_numbers", 10)
    got: list[int] = []

    def on_number(msg: Int32) -> None:
        if msg.data == 3:
            raise RuntimeError("callback fault on message 3")
        got.append(msg.data)
    node.create_subscription(Int32, "/spinner_numbers", on_number, 10)
    executor = SingleThreadedExecutor(context=ros.context)
    executor.add_node(node)
    spinner = BackgroundSpinner(executor, "spinner-under-test").start()
    try:
        deadline = time.monotonic() + 10
        while node.count_publishers("/spinner_numbers") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        with caplog.at_level(logging.ERROR, logger="mj_manipulator_ros.ros.spinner"):
            for k in range(1, 7):
                pub.publish(Int32(data=k))
                time.sleep(0.05)
            while len(got) < 5 and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        spinner.stop()
        node.destroy_node()
        pub_node.destroy_node()
    assert got == [1, 2, 4, 5, 6], got   # served on after message 3's fault
    assert spinner.errors == 1 and "message 3" in str(spinner.error)
    assert any("callback fault on message 3" in r.getMessage() and r.exc_info
               for r in caplog.records), [r.getMessage() for r in caplog.records]
