"""Message definitions and type hashes for the bags we write, from the installed interfaces.

A rosbag2 MCAP file carries, per topic, the message definition (``ros2msg`` text: the type's
fields, then every nested type after a ``MSG:`` separator) and ``metadata.yaml`` carries the
type's RIHS01 hash. Both come from what is installed, so the bag describes the bytes on the wire:
the definitions from `rosbags`' type store for the distro (plus ``control_msgs`` from its
installed ``.msg``/``.action`` files: our build, Kilted or Jazzy layout), the hashes from the
``rosidl`` type-description JSON files next to each interface.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Optional

from mj_manipulator_ros.ros.selfcheck import installed_distro, interface_description_path

_SEPARATOR = "=" * 80


class BagTypes:
    """Definitions and hashes by type name (``pkg/msg/Name`` or ``pkg/action/Name_Part``)."""

    _shared: Optional["BagTypes"] = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        from rosbags.typesys import Stores, get_typestore, get_types_from_msg

        distro = "JAZZY" if installed_distro() == "jazzy" else "KILTED"
        self.store = get_typestore(getattr(Stores, f"ROS2_{distro}"))
        share = interface_description_path("control_msgs", "action/FollowJointTrajectory.action").parents[1]
        extra = {}
        own = sorted((share / "msg").glob("*.msg"))
        for f in own:
            extra.update(get_types_from_msg(f.read_text(), f"control_msgs/msg/{f.stem}"))
        text = (share / "action/FollowJointTrajectory.action").read_text()
        for f in own:  # the action names its package's messages unqualified
            text = re.sub(rf"^(\s*){f.stem}\b", rf"\1control_msgs/{f.stem}", text, flags=re.M)
        goal, result, feedback = text.split("\n---\n")
        for text, part in ((goal, "Goal"), (result, "Result"), (feedback, "Feedback")):
            extra.update(get_types_from_msg(text, f"control_msgs/action/FollowJointTrajectory_{part}"))
        self.store.register(extra)
        self.store.register(get_types_from_msg(   # the feedback topic's type: id + feedback
            "unique_identifier_msgs/UUID goal_id\n"
            "control_msgs/action/FollowJointTrajectory_Feedback feedback",
            "control_msgs/action/FollowJointTrajectory_FeedbackMessage"))
        self._hashes: dict[str, str] = {}

    @classmethod
    def shared(cls) -> "BagTypes":
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def msgdef(self, name: str) -> str:
        """The ``ros2msg`` definition of ``name`` with its nested types."""
        if name.endswith("_FeedbackMessage"):
            # an action's feedback message wraps the feedback with the goal id; rosbags' text
            # generator only names nested types of the msg/ kind, so the wrapper is composed
            # here from the two generated definitions. The nested feedback keeps its full
            # name (pkg/action/Name_Feedback): a reader that hashes the text (rosbags) must
            # arrive at the type's own RIHS01 hash, which names it so
            feedback = name.replace("_FeedbackMessage", "_Feedback")
            inner = self.store.generate_msgdef(feedback, ros_version=2)[0]
            uuid = self.store.generate_msgdef("unique_identifier_msgs/msg/UUID", ros_version=2)[0]
            short = feedback
            return (f"unique_identifier_msgs/UUID goal_id\n{short} feedback\n"
                    f"{_SEPARATOR}\nMSG: unique_identifier_msgs/UUID\n{uuid.strip()}\n"
                    f"{_SEPARATOR}\nMSG: {short}\n{inner.strip()}\n")
        return self.store.generate_msgdef(name, ros_version=2)[0]

    def exact_cdr(self, name: str, raw: bytes) -> bytes:
        """``raw`` (CDR, as rclpy's ``serialize_message`` returns it: with up to 8 bytes of
        buffer padding after the message, which readers such as rosbags refuse) cut to the
        message's own length, as DDS delivers it."""
        msgdef = self.store.get_msgdef(name)
        little = bool(raw[1])
        func = msgdef.deserialize_cdr_le if little else msgdef.deserialize_cdr_be
        _, pos = func(raw[4:], 0, msgdef.cls, self.store)
        return raw[:4 + pos]

    def rihs01(self, name: str) -> str:
        """The RIHS01 type hash, from the type-description JSON installed with the interface
        ('' when none is installed)."""
        if name not in self._hashes:
            pkg, kind, rest = name.split("/")
            base = rest.split("_")[0] if kind == "action" else rest
            try:
                path = interface_description_path(pkg, f"{kind}/{base}.json")
            except FileNotFoundError:
                path = None
            if path is not None:
                for entry in json.loads(path.read_text())["type_hashes"]:
                    self._hashes.setdefault(entry["type_name"], entry["hash_string"])
            self._hashes.setdefault(name, "")
        return self._hashes[name]

