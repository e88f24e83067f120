"""A message the middleware refuses to publish is dropped and counted; the simulator's physics
goes on (sim/refused_messages.py). Fast DDS's refusals come now and then while other processes'
readers come and go and cannot be made on demand here: the simulator's real joint-state
publisher is wrapped so that its next few writes are refused the way rmw_fastrtps refuses one
(the same exception, raised where rclpy raises it), and everything else is real."""

from __future__ import annotations

import threading
import time

import rclpy
from rclpy._rclpy_pybind11 import RCLError
from sensor_msgs.msg import JointState

#: writes refused in a row
REFUSED = 3


class Refusing:
    """The simulator's publisher, whose next ``REFUSED`` writes the middleware refuses."""

    def __init__(self, publisher) -> None:
        self.publisher = publisher
        self.left = REFUSED
        self.lock = threading.Lock()

    def publish(self, msg) -> None:
        with self.lock:
            refuse = self.left > 0
            self.left -= refuse
        if refuse:
            raise RCLError("Failed to publish: cannot publish data, at ./src/rmw_publish.cpp:68, "
                           "at ./src/rcl/publisher.c:285")
        self.publisher.publish(msg)


def test_a_refused_joint_state_is_dropped_and_physics_goes_on(tiny_sim, ros) -> None:
    """Three refused joint-state messages: physics keeps stepping, the refusal is said once,
    counted, and joint states keep arriving at a reader (regression: the first refusal stopped
    physics, "physics stopped: RCLError", and no joint state came again)."""
    sim = tiny_sim()
    said: list[tuple[str, str]] = []
    sim.refused.on_event = lambda level, text: said.append((level, text))
    topic = next(iter(sim._joint_pubs))
    received: list[float] = []
    node = rclpy.create_node("refused_reader", context=ros.context)
    try:
        from rclpy.executors import SingleThreadedExecutor
        node.create_subscription(JointState, topic, lambda m: received.append(time.monotonic()),
                                 10)
        executor = SingleThreadedExecutor(context=ros.context)
        executor.add_node(node)
        deadline = time.monotonic() + 10.0
        while not received and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        assert received, "no joint state reached the reader before the refusals"
        cycles = sim.shared.health().cycles
        refusing = Refusing(sim._joint_pubs[topic])
        sim._joint_pubs[topic] = refusing
        while refusing.left > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused_at = time.monotonic()
        while (not received or received[-1] < refused_at + 0.2) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        executor.shutdown(timeout_sec=1.0)
    finally:
        node.destroy_node()
    assert sim.shared.error is None, f"physics stopped: {sim.shared.error!r}"
    assert sim.shared.health().cycles > cycles, "physics did not step after the refusals"
    assert received[-1] > refused_at + 0.2, "no joint state arrived after the refusals"
    assert sim.refused.counts == {topic: REFUSED}, sim.refused.counts
    assert len(said) == 1 and said[0][0] == "warn" and topic in said[0][1] and \
        "cannot publish data" in said[0][1], said
    assert "cannot publish data" in sim.refused.summary()
