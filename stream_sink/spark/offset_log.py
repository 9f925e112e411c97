"""Spark's offset log, read on the driver: the end offsets and event-time watermark of
each batch, and where a query's first batch started.

``<checkpointLocation>/offsets/<batch id>`` is written before the batch runs: a version
line (``v1``), a JSON metadata line (``batchWatermarkMs``, ``batchTimestampMs``,
``conf``), then one line per source with that source's end offsets as JSON (Kafka:
``{"topic":{"0":123}}``; ``-`` for a source with none yet). ``batchWatermarkMs`` is the
query's event-time watermark for the batch; 0 means the query has none (yet).

Kafka's source also logs the offsets its first batch starts from, resolved
(``earliest``/``latest`` made numbers), in ``<checkpointLocation>/sources/<n>/0``: a zero
byte, ``v1`` and the JSON. Other sources keep other things there (a file source its
file list, the rate source its start time), so only a JSON object of objects (topic →
partition → offset) is taken as starting offsets.

:class:`SparkOffsetLog` is the commit protocol's offset source
(:class:`~stream_sink.commit.source_position.OffsetSource`).
"""

from __future__ import annotations

import json
from typing import Any

from stream_sink.commit.source_position import BatchOffsets, watermark_ms
from stream_sink.exceptions import CorruptStateError, MissingFileError
from stream_sink.io import FileIO

OFFSETS_DIR = "offsets"
SOURCES_DIR = "sources"
NO_OFFSET = "-"


def parse_offsets(raw: bytes, batch_id: int, *, where: str) -> BatchOffsets:
    """The offsets of one offset log file (see module); CorruptStateError when it is not one."""
    lines = raw.decode("utf-8", "replace").splitlines()
    if len(lines) < 2 or not lines[0].strip().startswith("v"):
        raise CorruptStateError(
            f"{where}: not a Spark offset log file (expected a version line such as 'v1' "
            "and a metadata line)"
        )
    try:
        metadata = json.loads(lines[1])
        sources = tuple(
            None if line.strip() == NO_OFFSET else json.loads(line)
            for line in lines[2:]
            if line.strip()
        )
    except ValueError as e:
        raise CorruptStateError(f"{where}: a line is not JSON ({e})") from e
    mark = metadata.get("batchWatermarkMs") if isinstance(metadata, dict) else None
    return BatchOffsets(batch_id, sources, watermark_ms(mark))


def parse_initial_offsets(raw: bytes) -> dict[str, Any] | None:
    """The starting offsets in a Kafka source's ``sources/<n>/0``; None when the file
    holds something else (see module)."""
    text = raw[1:] if raw[:1] == b"\x00" else raw
    lines = text.decode("utf-8", "replace").split("\n", 1)
    if len(lines) != 2 or not lines[0].strip().startswith("v"):
        return None
    try:
        value = json.loads(lines[1])
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    if not all(isinstance(v, dict) for v in value.values()):
        return None
    return value


class SparkOffsetLog:
    """The offset log of the query checkpointing at ``location`` (Spark's
    ``checkpointLocation``), read through ``io``."""

    def __init__(self, location: str, io: FileIO | None = None) -> None:
        self.location = location.rstrip("/")
        self.io = io or FileIO.for_location(self.location, {})

    @property
    def where(self) -> str:
        return f"{self.location}/{OFFSETS_DIR}"

    def batch(self, batch_id: int) -> BatchOffsets:
        where = f"{self.where}/{batch_id}"
        return parse_offsets(self.io.read_bytes(where), batch_id, where=where)

    def starting(self) -> tuple[Any, ...] | None:
        first = self._first_batch()
        if first is None or first.sources is None:
            return None
        out: list[Any] = []
        for n in range(len(first.sources)):
            try:
                raw = self.io.read_bytes(f"{self.location}/{SOURCES_DIR}/{n}/0")
            except MissingFileError:
                out.append(None)
                continue
            out.append(parse_initial_offsets(raw))
        return tuple(out)

    def _first_batch(self) -> BatchOffsets | None:
        names = (p.rstrip("/").rsplit("/", 1)[-1] for p in self.io.list_dir(self.where))
        ids = sorted(int(n) for n in names if n.isdigit())
        return self.batch(ids[0]) if ids else None
