"""Messages the middleware refused to publish: dropped, counted and said, never a reason to
stop physics.

The simulator publishes joint states and ``/clock`` from its physics thread. Fast DDS fails a
write now and then (``RCLError: Failed to publish: cannot publish data``) while other
processes' readers come and go (rmw_fastrtps#313, rclcpp#827); once, on this machine, during
a test whose neighbour had just ended, it stopped the simulator mid-run (2026-12-07: "physics
stopped: RCLError", and the executor then heard no joint state for 10 s). A controller
manager's state broadcaster drops a message it cannot publish and goes on; so does the
simulator: the readers see a message missing, which the executor's stale-state watch judges
like any other gap. A publisher whose context is shut down still raises (the simulator is
ending).
"""

from __future__ import annotations

import threading
from typing import Callable

from rclpy._rclpy_pybind11 import RCLError

EventHook = Callable[[str, str], None]


class RefusedMessages:
    """Publishes through :meth:`publish`; counts and says what the middleware refused.

    Args:
        on_event: ``(level, text)``: the first refusal on each topic is said ("warn"), with the
            middleware's words; later ones are counted (:meth:`summary`).
    """

    def __init__(self, on_event: EventHook) -> None:
        self.on_event = on_event
        self._lock = threading.Lock()
        #: topic -> messages refused so far
        self.counts: dict[str, int] = {}
        #: topic -> the first refusal's text
        self.first: dict[str, str] = {}

    def publish(self, publisher, msg, topic: str) -> bool:
        """Publish ``msg`` on ``publisher`` (its ``topic``); False when the middleware refused
        it (dropped, counted). Raises what is not a refusal (an invalid publisher, a shut down
        context)."""
        try:
            publisher.publish(msg)
            return True
        except RCLError as exc:
            with self._lock:
                n = self.counts.get(topic, 0) + 1
                self.counts[topic] = n
                if n == 1:
                    self.first[topic] = str(exc)
            if n == 1:
                self.on_event("warn", f"the middleware refused a message on {topic} ({exc}); it "
                                      "is dropped and physics goes on (each later one is counted,"
                                      " and said when the simulator ends)")
            return False

    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def summary(self) -> str:
        """One line: how many messages were refused, per topic (empty when none was)."""
        with self._lock:
            if not self.counts:
                return ""
            return "messages the middleware refused (dropped): " + ", ".join(
                f"{topic} {n} (first: {self.first[topic]})" for topic, n in self.counts.items())
