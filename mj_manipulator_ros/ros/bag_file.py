"""One rosbag2 MCAP file written as it goes, so that a cut leaves every complete chunk readable.

A rosbag2 bag's storage file alone (``ros2 bag info x.mcap``, rosbags' ``AnyReader``, Foxglove,
the ``mcap`` library all open a bare ``.mcap`` file): the ``ros2`` profile, one schema per type
(its ``ros2msg`` definition, :class:`~mj_manipulator_ros.ros.bag_types.BagTypes`), one channel
per topic, messages as CDR bytes. Written with the ``mcap`` library in chunks of
:data:`CHUNK_BYTES`, each chunk handed to the operating system and synced to the disk as it is
full (:class:`_SyncedFile`): a process killed, a machine that lost power or a disk that filled
up mid-write leaves a file whose complete records hold everything up to the last chunk synced.
Such a file has no summary and no footer: :func:`read_cut` reads its records up to the cut
(the ``mcap`` library's stream reader) and :func:`recover` writes them into a complete file.

Artifacts (plan, configuration, report) are MCAP attachments (``application/yaml`` or
``application/json``); those known at the start are written first, so a cut file keeps them.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import Iterator, Mapping, Optional

from mj_manipulator_ros.core.errors import ConfigError

#: a chunk's size (bytes): what a cut may lose at most (the chunk being filled)
CHUNK_BYTES = 64 * 1024
PROFILE = "ros2"
#: what rosbag2 puts in each channel's metadata (readers expect the key)
CHANNEL_METADATA = {"offered_qos_profiles": ""}


class _SyncedFile:
    """The stream the MCAP writer writes to: every write goes to the operating system at once
    (no buffer in this process) and is synced to the disk (``fsync``) after each write of a
    chunk or more."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._pos = 0

    def write(self, data) -> int:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
            self._pos += n
        if len(data) >= CHUNK_BYTES // 2:
            os.fsync(self._fd)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)


class BagFile:
    """Args:
        path: the ``.mcap`` file to create (must not exist).
        topics: topic -> message type name (``pkg/msg/Name``).
        artifacts: name -> text, written first as attachments.

    Raises:
        ConfigError: ``path`` exists, or cannot be created (naming it and why).
    """

    def __init__(self, path: str | Path, topics: Mapping[str, str],
                 artifacts: Optional[Mapping[str, str]] = None) -> None:
        from mcap.writer import CompressionType, Writer

        from mj_manipulator_ros.ros.bag_types import BagTypes

        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = _SyncedFile(self.path)
        except FileExistsError:
            raise ConfigError(f"black box: {self.path} exists; a bag is never overwritten") \
                from None
        except OSError as exc:
            raise ConfigError(f"black box: cannot create {self.path}: {exc.strerror}") from None
        self._writer = Writer(self._file, chunk_size=CHUNK_BYTES,
                              compression=CompressionType.NONE)
        self._writer.start(profile=PROFILE, library="mj_manipulator_ros")
        types = BagTypes.shared()
        schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        for topic, name in topics.items():
            if name not in schemas:
                schemas[name] = self._writer.register_schema(
                    name=name, encoding="ros2msg", data=types.msgdef(name).encode())
            self._channels[topic] = self._writer.register_channel(
                topic=topic, message_encoding="cdr", schema_id=schemas[name],
                metadata=dict(CHANNEL_METADATA))
        #: messages written per topic
        self.counts: dict[str, int] = {topic: 0 for topic in topics}
        self._closed = False
        for name, text in (artifacts or {}).items():
            self.attach(name, text)

    def write(self, topic: str, log_time_ns: int, data: bytes) -> None:
        """One message (CDR bytes, exact length) on a declared topic, at its receipt time."""
        self._writer.add_message(channel_id=self._channels[topic], log_time=int(log_time_ns),
                                 data=data, publish_time=int(log_time_ns))
        self.counts[topic] += 1

    def attach(self, name: str, text: str) -> None:
        """Keep ``text`` in the file as the attachment ``name`` (JSON when it starts with '{')."""
        media = "application/json" if text.lstrip().startswith("{") else "application/yaml"
        now = time.time_ns()
        self._writer.add_attachment(create_time=now, log_time=now, name=name, media_type=media,
                                    data=text.encode())

    def close(self) -> Path:
        """Write the last chunk, the summary and the footer; returns the file. Idempotent."""
        if not self._closed:
            self._closed = True
            try:
                self._writer.finish()
            finally:
                self._file.close()
        return self.path


def read_cut(path: str | Path) -> Iterator[tuple[str, str, object]]:
    """Every complete record of an MCAP file, cut or whole, in file order, as (kind, key,
    record): ``("schema", name, Schema)``, ``("channel", topic, Channel)``,
    ``("message", topic, Message)``, ``("attachment", name, Attachment)``. Stops quietly where
    the file was cut (a record or chunk not whole)."""
    from mcap.exceptions import McapError
    from mcap.records import Attachment, Channel, Message, Schema
    from mcap.stream_reader import StreamReader

    channels: dict[int, str] = {}
    with open(path, "rb") as f:
        try:
            for record in StreamReader(f, skip_magic=False, emit_chunks=False).records:
                if isinstance(record, Schema):
                    yield "schema", record.name, record
                elif isinstance(record, Channel):
                    channels[record.id] = record.topic
                    yield "channel", record.topic, record
                elif isinstance(record, Message):
                    yield "message", channels.get(record.channel_id, ""), record
                elif isinstance(record, Attachment):
                    yield "attachment", record.name, record
        except (McapError, EOFError, ValueError, struct.error):
            return   # the cut: a record or chunk not whole


def recover(path: str | Path, out: str | Path) -> dict[str, int]:
    """Write the readable part of ``path`` (a file cut by a kill, a power loss or a full disk)
    into ``out``, a complete MCAP file every reader opens. Returns messages per topic.

    Raises:
        ConfigError: ``out`` exists, or ``path`` has no complete header (nothing to recover).
    """
    from mcap.writer import CompressionType, Writer

    out = Path(out)
    if out.exists():
        raise ConfigError(f"recover: {out} exists; never overwritten")
    counts: dict[str, int] = {}
    writer = None
    schema_ids: dict[int, int] = {}
    channel_ids: dict[int, int] = {}
    with open(out, "xb") as f:
        for kind, key, rec in read_cut(path):
            if writer is None:
                writer = Writer(f, chunk_size=CHUNK_BYTES, compression=CompressionType.NONE)
                writer.start(profile=PROFILE, library="mj_manipulator_ros (recovered)")
            if kind == "schema":
                schema_ids[rec.id] = writer.register_schema(rec.name, rec.encoding, rec.data)
            elif kind == "channel":
                channel_ids[rec.id] = writer.register_channel(
                    rec.topic, rec.message_encoding, schema_ids.get(rec.schema_id, 0),
                    dict(rec.metadata))
                counts.setdefault(rec.topic, 0)
            elif kind == "message" and rec.channel_id in channel_ids:
                writer.add_message(channel_ids[rec.channel_id], rec.log_time, rec.data,
                                   rec.publish_time, rec.sequence)
                counts[key] = counts.get(key, 0) + 1
            elif kind == "attachment":
                writer.add_attachment(rec.create_time, rec.log_time, rec.name, rec.media_type,
                                      rec.data)
        if writer is None:
            f.close()
            out.unlink()
            raise ConfigError(f"recover: {path} has no complete MCAP header: nothing to recover")
        writer.finish()
    return counts
