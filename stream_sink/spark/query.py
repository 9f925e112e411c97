"""What Spark's checkpoint location says about a streaming query.

``<checkpointLocation>/metadata`` holds the query's persistent id as JSON
(``{"id":"<uuid>"}``), written once when the query first starts and kept across
restarts; it is the sink's job id. ``<checkpointLocation>/commits/<batch id>`` exists
for each batch whose ``foreachBatch`` returned: Spark will not run those batches again,
so the sink must already hold them durably.

``<checkpointLocation>/offsets/<batch id>`` holds a batch's end offsets, one line per
source after a version line and a metadata line (watermark, timestamp, conf): a batch
whose offsets equal its predecessor's read no input (a no-data batch Spark runs to move
an event-time watermark).

Invariants: all are read through FileIO, so ``s3a://``/``s3://`` and local locations
behave alike; files that are not batch ids (``.0.crc``, temp files) are ignored.
"""

from __future__ import annotations

import json
import re

from stream_sink.exceptions import CheckpointError, CorruptStateError, MissingFileError
from stream_sink.io import FileIO

METADATA_FILE = "metadata"
COMMITS_DIR = "commits"
OFFSETS_DIR = "offsets"
_BATCH_FILE = re.compile(r"^\d+$")


def io_for(spark_checkpoint_location: str, properties: dict[str, str] | None = None) -> FileIO:
    return FileIO.for_location(spark_checkpoint_location, properties or {})


def read_query_id(spark_checkpoint_location: str, io: FileIO | None = None) -> str:
    """The persistent query id of the query checkpointing at this location.

    Raises CheckpointError when the query has not started there (the streaming query
    was given another ``checkpointLocation``), CorruptStateError for unreadable content.
    """
    io = io or io_for(spark_checkpoint_location)
    where = f"{spark_checkpoint_location.rstrip('/')}/{METADATA_FILE}"
    try:
        raw = io.read_bytes(where)
    except MissingFileError:
        raise CheckpointError(
            f"{where} does not exist: start the streaming query with "
            f".option('checkpointLocation', sink.spark_checkpoint_location) "
            f"(= {spark_checkpoint_location!r})"
        ) from None
    return parse_query_id(raw, where)


def parse_query_id(raw: bytes, where: str) -> str:
    """The ``id`` of the first JSON object line in ``raw`` (Spark writes one line)."""
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorruptStateError(f"{where}: not valid JSON ({e})") from e
        query_id = doc.get("id") if isinstance(doc, dict) else None
        if isinstance(query_id, str) and query_id:
            return query_id
        break
    raise CorruptStateError(f'{where}: no query id (expected a line like {{"id":"<uuid>"}})')


def acknowledged_batch_ids(spark_checkpoint_location: str, io: FileIO | None = None) -> list[int]:
    """Batch ids in Spark's commit log, ascending (empty when there is none yet)."""
    return _batch_files(spark_checkpoint_location, COMMITS_DIR, io)


def planned_batch_ids(spark_checkpoint_location: str, io: FileIO | None = None) -> list[int]:
    """Batch ids in Spark's offset log, ascending: batches Spark has planned (their input
    ranges written down); the newest may still be running or waiting to be re-run."""
    return _batch_files(spark_checkpoint_location, OFFSETS_DIR, io)


def _batch_files(spark_checkpoint_location: str, log_dir: str, io: FileIO | None) -> list[int]:
    io = io or io_for(spark_checkpoint_location)
    directory = f"{spark_checkpoint_location.rstrip('/')}/{log_dir}"
    names = (loc.rstrip("/").rsplit("/", 1)[-1] for loc in io.list_dir(directory))
    return sorted(int(n) for n in names if _BATCH_FILE.match(n))


def batch_read_input(
    spark_checkpoint_location: str, batch_id: int, io: FileIO | None = None
) -> bool:
    """Whether batch ``batch_id`` read input: False only when its logged source offsets
    equal the previous batch's (True when either log file is missing or unreadable,
    the loss checks' safe side)."""
    io = io or io_for(spark_checkpoint_location)
    if batch_id <= 0:
        return True
    try:
        ends = [_source_offsets(spark_checkpoint_location, b, io) for b in (batch_id - 1, batch_id)]
    except (MissingFileError, UnicodeDecodeError):
        return True
    return ends[0] != ends[1] or not ends[1]


def _source_offsets(spark_checkpoint_location: str, batch_id: int, io: FileIO) -> list[str]:
    """The source offset lines of ``offsets/<batch_id>`` (after version and metadata)."""
    where = f"{spark_checkpoint_location.rstrip('/')}/{OFFSETS_DIR}/{batch_id}"
    lines = io.read_bytes(where).decode("utf-8").splitlines()
    return [line.strip() for line in lines[2:]]
