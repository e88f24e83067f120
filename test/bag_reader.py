"""An independent reader for the bags we write (they are written with rosbags): the ``mcap``
library for the container, ``mcap_ros2`` to decode standard messages from the schema text in the
file, and rclpy's own deserializer for the control_msgs action types (mcap_ros2's vendored
rosidl parser rejects type names with an underscore, e.g. FollowJointTrajectory_Goal). Every bag
read here is also opened with rosbags' high-level reader, every message deserialized."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rclpy.serialization import deserialize_message


@dataclass
class Bag:
    metadata: dict
    schemas: dict = field(default_factory=dict)      # topic -> (schema name, encoding, text)
    messages: list = field(default_factory=list)     # (topic, log_time_ns, raw bytes)
    mcap_metadata: dict = field(default_factory=dict)  # name -> mapping (MCAP metadata records)
    attachments: dict = field(default_factory=dict)   # name -> text (MCAP attachments)

    def on(self, topic: str) -> list:
        return [m for m in self.messages if m[0] == topic]

    def decoded(self, topic: str, msg_class=None) -> list:
        """Messages of ``topic``: with ``msg_class`` by rclpy's deserializer, else by
        mcap_ros2 from the schema in the file."""
        if msg_class is not None:
            return [deserialize_message(raw, msg_class) for _, _, raw in self.on(topic)]
        return [m for t, m in self._decoded if t == topic]


def read_bag(path: Path) -> Bag:
    """A bag directory (metadata.yaml and its files) or one ``.mcap`` file."""
    path = Path(path)
    if path.is_file():
        meta, files = {}, [path]
    else:
        meta = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        files = [path / rel for rel in meta["relative_file_paths"]]
    bag = Bag(meta)
    bag._decoded = []
    for file in files:
        with file.open("rb") as fh:
            reader = make_reader(fh, decoder_factories=[DecoderFactory()])
            summary = reader.get_summary()
            for ch in summary.channels.values():
                s = summary.schemas[ch.schema_id]
                bag.schemas[ch.topic] = (s.name, s.encoding, s.data.decode())
            for record in reader.iter_metadata():
                bag.mcap_metadata[record.name] = dict(record.metadata)
            for record in reader.iter_attachments():
                bag.attachments[record.name] = record.data.decode()
            for schema, channel, message in reader.iter_messages():
                bag.messages.append((channel.topic, message.log_time, message.data))
        with file.open("rb") as fh:
            reader = make_reader(fh, decoder_factories=[DecoderFactory()])
            plain = [t for t, (name, _, _) in bag.schemas.items() if "_" not in name.split("/")[-1]]
            for _, channel, _, msg in reader.iter_decoded_messages(topics=plain):
                bag._decoded.append((channel.topic, msg))
    check_with_rosbags(path, bag)
    return bag


def check_with_rosbags(path: Path, bag: Bag) -> None:
    """The most used pure-Python reader must open the bag: rosbags' ``AnyReader`` (which hashes
    each schema's text against the declared RIHS01 hash) deserializes every message on every
    topic, as many per topic as the file holds."""
    from rosbags.highlevel import AnyReader

    counts: dict[str, int] = {}
    with AnyReader([path]) as reader:
        for connection, _, raw in reader.messages():
            reader.deserialize(raw, connection.msgtype)
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
    in_file: dict[str, int] = {}
    for topic, _, _ in bag.messages:
        in_file[topic] = in_file.get(topic, 0) + 1
    assert counts == in_file, f"rosbags read {counts}, the file holds {in_file}"
