"""Where a sink's stream is: the source offsets and event-time watermark of each commit.

Every commit of a sink whose committer knows the query's offsets (an :class:`OffsetSource`:
Spark's offset log, ``stream_sink.spark.offset_log``) records, in the same table version
as its data, the end offsets of the highest batch it commits (one JSON value per source
of the query, as the engine writes it: Kafka's ``{"topic":{"0":123}}``) and the query's
event-time watermark when it has one. Iceberg writes them into the snapshot summary and
a per-sink table property (``commit/iceberg/source_position.py``), Delta into the commit's
``commitInfo`` and, on a table with the ``domainMetadata`` feature, a per-sink domain
(``commit/delta/source_position.py``); the property and the domain hold the same JSON
(:meth:`SourcePosition.to_json`) under :data:`POSITION_PREFIX` + sink id. Both read them
back as a :class:`SourcePosition`.

``resume_from_table="<job id>:<batch id>"`` (a :class:`ResumePoint`) makes a new query
(a new checkpoint location, the same sink id) the continuation of the one that recorded
that position: :func:`check_resume` refuses it unless the table's position for the sink
is exactly the one named, with known offsets, and the new query starts at those offsets.

With an ``event_time_column`` (a timestamp, date or long column of the table), a commit
also records the lowest and highest value of that column over the data files it adds,
read from their column statistics (:data:`EVENT_TIME_LOW_MS`, :data:`EVENT_TIME_HIGH_MS`;
``commit/iceberg/event_time.py``, ``commit/delta/event_time.py``); when any of those
files has no statistics for the column, nothing is recorded rather than a guess.

Invariants: a commit whose offsets cannot be read records a position with unknown
offsets (``sources`` None) rather than none, so a table never shows an older position
than the data it holds; a recorded position with unknown offsets cannot be resumed from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stream_sink.exceptions import InvalidOptionError, SourcePositionError

SOURCE_OFFSETS = "stream-sink.source-offsets"
"""Summary / commit key: a JSON array, one element per source, of the end offsets."""
EVENT_TIME_WATERMARK_MS = "stream-sink.event-time-watermark-ms"
"""Summary / commit key: the query's event-time watermark (epoch ms), when above 0."""
EVENT_TIME_LOW_MS = "stream-sink.event-time-low-ms"
"""Summary / commit key: the lowest value (epoch ms, rounded down) of the sink's
``event_time_column`` over the data files the commit adds, from their column statistics."""
EVENT_TIME_HIGH_MS = "stream-sink.event-time-high-ms"
"""Summary / commit key: the highest such value (epoch ms, rounded up)."""
SOURCE_BATCH = "stream-sink.source-batch"
"""Commit key (Delta): the batch id whose end offsets are recorded."""
POSITION_PREFIX = "stream-sink.source-position."
"""Followed by the sink id: the Iceberg table property and the Delta domain holding the
sink's :class:`SourcePosition` as :meth:`SourcePosition.to_json` encodes it."""


@dataclass(frozen=True)
class BatchOffsets:
    """What the engine logged for one batch: each source's end offsets (parsed JSON; None
    for a source with none yet), and the event-time watermark (None: none)."""

    batch_id: int
    sources: tuple[Any, ...] | None
    """None: the offsets could not be read (recorded as unknown)."""
    event_time_watermark_ms: int | None = None

    @property
    def offsets_json(self) -> str | None:
        return None if self.sources is None else dumps(list(self.sources))


class OffsetSource(Protocol):
    """The query's offsets, as the committer asks for them."""

    @property
    def where(self) -> str:
        """Where the offsets are read, for messages."""
        ...

    def batch(self, batch_id: int) -> BatchOffsets:
        """The end offsets of ``batch_id`` (``sources`` None when they cannot be read)."""
        ...

    def starting(self) -> tuple[Any, ...] | None:
        """The offsets the query's first batch starts from, per source (None for a
        source that does not record them); None when nothing says."""
        ...


@dataclass(frozen=True)
class SourcePosition:
    """A sink's position as a table records it: after batch ``batch_id`` of job
    ``job_id``, at ``sources`` (per source; None: unknown)."""

    job_id: str
    sink_id: str
    batch_id: int
    sources: tuple[Any, ...] | None
    event_time_watermark_ms: int | None = None
    version: int | None = None
    """The Iceberg snapshot id or Delta version that recorded it (None: not known)."""
    timestamp_ms: int | None = None
    """When that commit was made (None: not known)."""
    event_time_low_ms: int | None = None
    """The lowest ``event_time_column`` value of the commit's data files (None: no
    column configured, or a file without statistics for it)."""
    event_time_high_ms: int | None = None
    """The highest such value (None as for the low one)."""

    @property
    def point(self) -> str:
        """``<job id>:<batch id>``: what ``resume_from_table`` names."""
        return f"{self.job_id}:{self.batch_id}"

    @property
    def offsets_json(self) -> str | None:
        return None if self.sources is None else dumps(list(self.sources))

    def starting_offsets(self, source: int = 0) -> str:
        """The ``startingOffsets`` JSON that starts a new query where this one ended,
        for source number ``source``; SourcePositionError when it is not known."""
        if self.sources is None:
            raise SourcePositionError(
                f"sink {self.sink_id}: the table records batch {self.batch_id} of job "
                f"{self.job_id} without source offsets (the query's offset log could not be "
                "read when it committed): there is no position to start from"
            )
        if not 0 <= source < len(self.sources) or self.sources[source] is None:
            raise SourcePositionError(
                f"sink {self.sink_id}: the recorded position {self.point} has no offsets "
                f"for source {source} (it has {len(self.sources)} source(s))"
            )
        return dumps(self.sources[source])

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "job-id": self.job_id,
            "sink-id": self.sink_id,
            "batch-id": self.batch_id,
            "sources": None if self.sources is None else list(self.sources),
        }
        if self.event_time_watermark_ms is not None:
            doc["event-time-watermark-ms"] = self.event_time_watermark_ms
        if self.version is not None:
            doc["version"] = self.version
        if self.timestamp_ms is not None:
            doc["timestamp-ms"] = self.timestamp_ms
        if self.event_time_low_ms is not None and self.event_time_high_ms is not None:
            doc["event-time-low-ms"] = self.event_time_low_ms
            doc["event-time-high-ms"] = self.event_time_high_ms
        return dumps(doc)

    @staticmethod
    def from_json(text: str) -> SourcePosition | None:
        """The position, or None when ``text`` is not one."""
        try:
            doc = json.loads(text)
            sources = doc.get("sources")
            return SourcePosition(
                str(doc["job-id"]),
                str(doc["sink-id"]),
                int(doc["batch-id"]),
                None if sources is None else tuple(sources),
                watermark_ms(doc.get("event-time-watermark-ms")),
                _int_or_none(doc.get("version")),
                _int_or_none(doc.get("timestamp-ms")),
                _int_or_none(doc.get("event-time-low-ms")),
                _int_or_none(doc.get("event-time-high-ms")),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def position_of(
    offsets: BatchOffsets,
    job_id: str,
    sink_id: str,
    version: int | None = None,
    event_times: EventTimeRange | None = None,
) -> SourcePosition:
    """The position a commit of ``offsets`` (and of data files whose event times span
    ``event_times``) records for (job, sink)."""
    low, high = event_times if event_times is not None else (None, None)
    return SourcePosition(
        job_id,
        sink_id,
        offsets.batch_id,
        offsets.sources,
        offsets.event_time_watermark_ms,
        version,
        None,
        low,
        high,
    )


EventTimeRange = tuple[int, int]
"""The lowest and highest event time (epoch ms) of a commit's data files."""


def span(ranges: Iterable[EventTimeRange | None]) -> EventTimeRange | None:
    """The range covering every one of ``ranges``; None when any is None (a file without
    statistics for the column: nothing is known of it, nothing is recorded) or there are
    none. A file that holds only nulls of the column is left out by its caller."""
    lows: list[int] = []
    highs: list[int] = []
    for r in ranges:
        if r is None:
            return None
        lows.append(r[0])
        highs.append(r[1])
    return (min(lows), max(highs)) if lows else None


def event_time_entries(event_times: EventTimeRange | None) -> dict[str, str]:
    """The summary / commit keys recording ``event_times`` (none without a range)."""
    if event_times is None:
        return {}
    return {EVENT_TIME_LOW_MS: str(event_times[0]), EVENT_TIME_HIGH_MS: str(event_times[1])}


def event_time_range(entries: Any) -> EventTimeRange | None:
    """The range a summary / ``operationParameters`` mapping records; None if none."""
    try:
        low, high = int(entries[EVENT_TIME_LOW_MS]), int(entries[EVENT_TIME_HIGH_MS])
    except (KeyError, TypeError, ValueError):
        return None
    return (low, high)


def parse_sources(text: str | None) -> tuple[Any, ...] | None:
    """The sources of a :data:`SOURCE_OFFSETS` value; None when absent or not an array."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return tuple(value) if isinstance(value, list) else None


def watermark_ms(value: Any) -> int | None:
    """An event-time watermark: an integer above 0, else None (Spark's 0 means none)."""
    try:
        ms = int(value)
    except (TypeError, ValueError):
        return None
    return ms if ms > 0 else None


def dumps(value: Any) -> str:
    """JSON as Spark prints offsets: compact, keys in the order given."""
    return json.dumps(value, separators=(",", ":"))


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


# --- resuming a new query from the table's position -----------------------------------------


@dataclass(frozen=True)
class ResumePoint:
    """``<job id>:<batch id>``: the recorded position a new query continues from."""

    job_id: str
    batch_id: int

    def __str__(self) -> str:
        return f"{self.job_id}:{self.batch_id}"

    @staticmethod
    def parse(text: str, *, option: str = "resume_from_table") -> ResumePoint:
        job, sep, batch = str(text).strip().rpartition(":")
        if not sep or not job or not batch.isdigit():
            raise InvalidOptionError(
                f"{option}={text!r}: expected '<job id>:<batch id>' as `stream-sink status "
                "--table T` prints the sink's recorded position"
            )
        return ResumePoint(job, int(batch))


def check_resume(
    point: ResumePoint,
    recorded: SourcePosition | None,
    starting: Sequence[Any] | None,
    *,
    table: str,
    sink_id: str,
    where: str,
) -> SourcePosition:
    """Refuse (SourcePositionError) to continue from ``point`` unless ``recorded`` (the
    table's position for ``sink_id``) is that position with known offsets and the new
    query's ``starting`` offsets (read at ``where``) equal its end offsets; returns it."""
    fix = f"run `stream-sink status --table {table}` and start from what it prints"
    if recorded is None:
        raise SourcePositionError(
            f"table {table}: resume_from_table={point} but the table records no source "
            f"position for sink {sink_id} (no commit of it recorded offsets); {fix}, or start "
            "the query without resume_from_table"
        )
    if (recorded.job_id, recorded.batch_id) != (point.job_id, point.batch_id):
        raise SourcePositionError(
            f"table {table}: resume_from_table={point} but the table's position for sink "
            f"{sink_id} is {recorded.point} (committed after the one named, or by another "
            f"job); {fix}: resume_from_table={recorded.point!r}"
        )
    if recorded.sources is None:
        raise SourcePositionError(
            f"table {table}: the position {recorded.point} of sink {sink_id} was committed "
            "without source offsets (the query's offset log could not be read then), so the "
            "stream cannot be continued from the table exactly once"
        )
    expected = dumps(list(recorded.sources))
    if starting is None or any(s is None for s in starting):
        raise SourcePositionError(
            f"table {table}: cannot tell where the new query starts (no starting offsets at "
            f"{where}; only sources that log them, such as Kafka, can be resumed from the "
            f"table); the recorded end offsets of sink {sink_id} are {expected}"
        )
    given = dumps(list(starting))
    if not same_offsets(list(starting), list(recorded.sources)):
        raise SourcePositionError(
            f"table {table}: the new query starts at {given} (read at {where}) but sink "
            f"{sink_id} recorded end offsets {expected} at {recorded.point}: starting "
            "elsewhere would duplicate or skip records. Start the query with "
            "`stream-sink status --table T --starting-offsets` as its startingOffsets"
        )
    return recorded


def same_offsets(a: Any, b: Any) -> bool:
    """Offsets equal as JSON values (object key order aside)."""
    return dumps(_sorted(a)) == dumps(_sorted(b))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value
