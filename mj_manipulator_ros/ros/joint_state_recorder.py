"""Record /joint_states to a JSON-lines file (the ``recorded`` replay mode's input).

One line per message: ``{"t": <header stamp, s>, "name": [...], "position": [...]}``; see
``mj_manipulator_ros.check.timeline.load_recording``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from rclpy.node import Node
from sensor_msgs.msg import JointState


class JointStateRecorder:
    """Subscribes on ``node`` (spun by its owner) and appends every message to ``path``."""

    def __init__(self, node: Node, path: str | Path, topic: str = "/joint_states") -> None:
        self.path = Path(path)
        self._file = self.path.open("w")
        self._lock = threading.Lock()
        self.count = 0
        self._sub = node.create_subscription(JointState, topic, self._on_msg, 100)
        self._node = node

    def _on_msg(self, msg: JointState) -> None:
        line = json.dumps({"t": msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9,
                           "name": list(msg.name), "position": list(msg.position)})
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self.count += 1

    def close(self) -> None:
        self._node.destroy_subscription(self._sub)
        with self._lock:
            self._file.close()
