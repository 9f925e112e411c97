"""Staging manifests: one batch's files written to Avro manifests before the commit.

Phase 1 of the commit writes each batch's data files into a data manifest and its
delete files into a delete manifest (one per partition spec, normally exactly one of
each), in the table's metadata location or ``stream-sink.manifests.location``, with a
placeholder snapshot id as Flink does; operator state then only holds the small
:class:`StagedManifests` pointing at them. Phase 2 reads the files back from there.

Invariants:
- A staging manifest name is unique per committer instance and batch (see
  :class:`ManifestNamer`): two instances racing on the same (job, operator, checkpoint)
  never overwrite each other's manifests.
- A staging manifest name holds only letters, digits, ``-``, ``_`` and ``.``
  (:func:`name_part`): characters S3's key guidelines call safe, and the only ones
  SeaweedFS's table buckets take in a table's metadata directory (they refuse ``=``,
  which a routed sink's operator id ``<sink id>=<table>`` holds, and ``! * ' ( ) + ~ %``).
- The serialized form starts with a magic and a version; newer versions are refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stream_sink.envelope import Envelope
from stream_sink.exceptions import CorruptStateError, ValidationError
from stream_sink.io.errors import io_failure
from stream_sink.io.fileio import FileIO
from stream_sink.table.manifest import (
    DataFile,
    FieldSummary,
    ManifestContent,
    ManifestFile,
    ManifestWriter,
    read_manifest,
)
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

from .watermark import MANIFESTS_LOCATION

log = logging.getLogger(__name__)

PLACEHOLDER_SNAPSHOT_ID = 0
"""Snapshot id written into staging manifests (Flink's DUMMY_SNAPSHOT_ID); never committed."""

STAGED_MANIFESTS_VERSION = 2
"""Version 2 adds ``truncate``, written only for a truncating batch (a stream_sink
without it refuses that payload instead of dropping the truncate)."""
STAGED_MANIFESTS = Envelope(
    b"SSDM", STAGED_MANIFESTS_VERSION, "serialized StagedManifests", CorruptStateError
)
"""The magic ``SSDM`` is the bytes' first name (Flink's "delta manifests"): states on disk
carry it, so it stays."""


@dataclass(frozen=True)
class StagedManifests:
    """Where one batch's staged files are: its data and delete manifests (one per
    partition spec the files were written with) and the data files its position
    deletes reference."""

    data_manifests: tuple[ManifestFile, ...] = ()
    delete_manifests: tuple[ManifestFile, ...] = ()
    referenced_data_files: tuple[str, ...] = ()
    truncate: bool = False
    """The batch empties the table first (``WriteResult.truncate``)."""

    @property
    def manifests(self) -> tuple[ManifestFile, ...]:
        return self.data_manifests + self.delete_manifests

    @property
    def is_empty(self) -> bool:
        return not self.data_manifests and not self.delete_manifests and not self.truncate


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def name_part(operator_id: str) -> str:
    """``operator_id`` as staging manifests' names hold it.

    An id of letters, digits, ``-``, ``_`` and ``.`` only is itself (every one-table
    sink's default id: the table's name). Any other id (a routed sink's
    ``<sink id>=<table>``) has each other character replaced by ``-`` and 8 hex digits of
    its SHA-256 appended (``routed-t=db.a`` becomes ``routed-t-db.a-<hash>``), so that it
    stays readable and two ids that differ only there (``a=b``, ``a-b``) get different
    names. The same id always gets the same part: a restart finds the names again.
    """
    if not _UNSAFE.search(operator_id):
        return operator_id
    digest = hashlib.sha256(operator_id.encode("utf-8")).hexdigest()[:8]
    return f"{_UNSAFE.sub('-', operator_id)}-{digest}"


@dataclass(frozen=True)
class ManifestNamer:
    """Names staging manifests: ``<job>-<operator>-<checkpoint>-<batch>-<token>-<n>.avro``,
    the operator as :func:`name_part` writes it.

    ``token`` is kept in operator state, so a restart that stages the same batch again
    overwrites the unreferenced manifests of its crashed attempt instead of leaving
    them behind; state restored from a checkpoint gets a new token, so it never shares
    names with an instance that may still run on the original state. ``n`` numbers a
    batch's manifests (data first, then deletes).
    """

    job_id: str
    operator_id: str
    token: str

    def name(self, checkpoint_id: int, batch_id: int, n: int) -> str:
        operator = name_part(self.operator_id)
        return f"{self.job_id}-{operator}-{checkpoint_id}-{batch_id}-{self.token}-{n:05d}.avro"

    def sweep_pattern(self) -> re.Pattern[str]:
        """Names of this namer's operator and token, whatever the checkpoint, batch and
        job: as :meth:`name` writes them, and with the operator id itself in place of its
        :func:`name_part` (the names state from stream_sink releases that kept ``=`` in
        manifest names holds), so that a restart from such state sweeps those too."""
        operators = sorted({re.escape(name_part(self.operator_id)), re.escape(self.operator_id)})
        return re.compile(
            rf"^.+-(?:{'|'.join(operators)})-\d+-\d+-{re.escape(self.token)}-\d{{5}}\.avro$"
        )


def staging_location(table: Table) -> str:
    """``stream-sink.manifests.location`` when set, else the table's metadata directory."""
    custom = table.properties.get(MANIFESTS_LOCATION, "").strip()
    return custom.rstrip("/") if custom else table.metadata_dir


# --- writing and reading -----------------------------------------------------------------


def write_staging_manifests(
    table: Table,
    namer: ManifestNamer,
    checkpoint_id: int,
    batch_id: int,
    files: WriteResult,
) -> StagedManifests:
    """Write ``files`` to new staging manifests; nothing is written for an empty batch.

    On failure the manifests already written are deleted again.
    """
    written: list[ManifestFile] = []
    try:
        data = _write_grouped(
            table, namer, checkpoint_id, batch_id, files.data_files, ManifestContent.DATA, written
        )
        deletes = _write_grouped(
            table,
            namer,
            checkpoint_id,
            batch_id,
            files.delete_files,
            ManifestContent.DELETES,
            written,
        )
    except BaseException:
        delete_manifests(table.io, written)
        raise
    return StagedManifests(data, deletes, tuple(files.referenced_data_files))


def _write_grouped(
    table: Table,
    namer: ManifestNamer,
    checkpoint_id: int,
    batch_id: int,
    files: Sequence[DataFile],
    content: ManifestContent,
    written: list[ManifestFile],
) -> tuple[ManifestFile, ...]:
    meta = table.metadata
    if files and content == ManifestContent.DELETES and meta.format_version < 2:
        raise ValidationError(
            f"batch {batch_id}: delete files need a v2 table; "
            f"{table.name} is v{meta.format_version}"
        )
    by_spec: dict[int, list[DataFile]] = {}
    for f in files:
        by_spec.setdefault(f.spec_id, []).append(f)
    out = []
    base = staging_location(table)
    for spec_id in sorted(by_spec):
        spec = meta.spec_by_id(spec_id)
        path = f"{base}/{namer.name(checkpoint_id, batch_id, len(written) + 1)}"
        with io_failure("writing staging manifest", path):
            writer = ManifestWriter.for_spec(
                table.io,
                path,
                spec,
                meta.schema,
                PLACEHOLDER_SNAPSHOT_ID,
                content,
                meta.format_version,
            )
            for f in by_spec[spec_id]:
                writer.add(f)
            manifest = writer.close()
        written.append(manifest)
        out.append(manifest)
    return tuple(out)


def read_staged_files(io: FileIO, metadata: TableMetadata, staged: StagedManifests) -> WriteResult:
    """The files ``staged`` points at, as they were staged (partition values by the spec
    each manifest was written with)."""

    def read(manifests: Iterable[ManifestFile]) -> tuple[DataFile, ...]:
        out: list[DataFile] = []
        for m in manifests:
            ptype = metadata.spec_by_id(m.partition_spec_id).partition_type(metadata.schema)
            out.extend(e.data_file for e in read_manifest(io, m, ptype))
        return tuple(out)

    return WriteResult(
        read(staged.data_manifests),
        read(staged.delete_manifests),
        staged.referenced_data_files,
        staged.truncate,
    )


def sweep_unreferenced(table: Table, namer: ManifestNamer, referenced: set[str]) -> list[str]:
    """Delete staging manifests carrying ``namer``'s operator and token that ``referenced``
    does not list: leftovers of a crash between staging and the state write, or between
    the state cleanup and the manifest deletion. The token is unique to this state's
    lineage, so no other instance's manifests match. Returns the paths deleted."""
    pattern = namer.sweep_pattern()
    base = staging_location(table)
    stale = [
        loc
        for loc in table.io.list_dir(base)
        if pattern.match(loc.rsplit("/", 1)[-1]) and loc not in referenced
    ]
    for loc in stale:
        try:
            table.io.delete(loc)
        except Exception as e:  # cleanup only
            log.warning("could not delete unreferenced staging manifest %s: %s", loc, e)
    return stale


def delete_manifests(io: FileIO, manifests: Iterable[ManifestFile]) -> None:
    """Delete staging manifests; a failure only logs (the commit already succeeded)."""
    for m in manifests:
        try:
            io.delete(m.manifest_path)
        except Exception as e:  # cleanup must never fail a completed checkpoint
            log.warning("could not delete staging manifest %s: %s", m.manifest_path, e)


# --- serialization -----------------------------------------------------------------------


def serialize_staged_manifests(staged: StagedManifests) -> bytes:
    """Versioned bytes: ``SSDM | version (uint16) | JSON`` (:mod:`stream_sink.envelope`)."""
    doc = {
        "data": [_manifest_to_json(m) for m in staged.data_manifests],
        "deletes": [_manifest_to_json(m) for m in staged.delete_manifests],
        "referenced": list(staged.referenced_data_files),
    }
    if staged.truncate:
        doc["truncate"] = True
    payload = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return STAGED_MANIFESTS.wrap(payload, STAGED_MANIFESTS_VERSION if staged.truncate else 1)


def deserialize_staged_manifests(data: bytes, *, where: str) -> StagedManifests:
    """Parse bytes of :func:`serialize_staged_manifests`; ``where`` is named in errors."""
    payload = STAGED_MANIFESTS.payload(data, where=where)
    try:
        doc = json.loads(payload)
        return StagedManifests(
            tuple(_manifest_from_json(m) for m in doc["data"]),
            tuple(_manifest_from_json(m) for m in doc["deletes"]),
            tuple(str(p) for p in doc["referenced"]),
            bool(doc.get("truncate", False)),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptStateError(f"{where}: malformed StagedManifests ({e!r})") from e


def _manifest_to_json(m: ManifestFile) -> dict[str, Any]:
    return {
        "path": m.manifest_path,
        "length": m.manifest_length,
        "spec-id": m.partition_spec_id,
        "content": int(m.content),
        "added-snapshot-id": m.added_snapshot_id,
        "counts": [
            m.added_files_count,
            m.existing_files_count,
            m.deleted_files_count,
            m.added_rows_count,
            m.existing_rows_count,
            m.deleted_rows_count,
        ],
        "partitions": None
        if m.partitions is None
        else [
            [s.contains_null, s.contains_nan, _b64(s.lower_bound), _b64(s.upper_bound)]
            for s in m.partitions
        ],
    }


def _manifest_from_json(doc: dict[str, Any]) -> ManifestFile:
    counts = doc["counts"]
    parts = doc["partitions"]
    return ManifestFile(
        manifest_path=str(doc["path"]),
        manifest_length=int(doc["length"]),
        partition_spec_id=int(doc["spec-id"]),
        content=ManifestContent(int(doc["content"])),
        sequence_number=None,
        min_sequence_number=None,
        added_snapshot_id=doc["added-snapshot-id"],
        added_files_count=counts[0],
        existing_files_count=counts[1],
        deleted_files_count=counts[2],
        added_rows_count=counts[3],
        existing_rows_count=counts[4],
        deleted_rows_count=counts[5],
        partitions=None
        if parts is None
        else tuple(FieldSummary(p[0], p[1], _unb64(p[2]), _unb64(p[3])) for p in parts),
    )


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _unb64(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value)
