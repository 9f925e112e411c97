"""Expire snapshots (Java's ``RemoveSnapshots``), then delete the files only they used.

Use::

    result = table.new_expire_snapshots().expire_older_than(ts_ms).retain_last(1).commit()

What is kept (Java's rules, applied to the metadata current at the commit):
- Refs: every ref but ``main`` whose snapshot is older than its ``max-ref-age-ms``
  (default ``history.expire.max-ref-age-ms``, unlimited) is removed; ``main`` never.
- Per remaining branch, walking back from its head: a snapshot is kept while fewer
  than ``min-snapshots-to-keep`` are kept (the ref's, else ``retain_last``, else
  ``history.expire.min-snapshots-to-keep``, default 1) or while it is not older than
  the cut-off (``now - max-snapshot-age-ms`` of the ref, else ``expire_older_than``,
  else ``now - history.expire.max-snapshot-age-ms``, default 5 days). The head of
  every ref is always kept; the first snapshot past both limits ends the walk.
- Per remaining tag: its snapshot. Snapshots in no ref's history: kept unless older
  than the cut-off. ``expire_snapshot_id`` removes a snapshot whatever its age,
  unless a ref points at it.
- The snapshot log loses every entry before the last one that names a removed
  snapshot (no gaps in time travel); old metadata files go per
  ``write.metadata.previous-versions-max`` and
  ``write.metadata.delete-after-commit.enabled`` at every commit (the catalog's job).

Invariants:
- Each attempt recomputes the expiry from the refreshed table (under the table's
  in-process commit lock, ``commit_lock``); the manifests it read stay cached for the
  next attempt, so a retry after a lost race reads only what the race added.
- Files are deleted only after the metadata swap, and only files that no retained
  snapshot of the committed metadata references: manifest lists of removed
  snapshots, manifests no retained list names, and data and delete files that such
  manifests name and no retained manifest holds live. Every retained manifest is
  read before anything is committed; one that cannot be read stops the expiry with
  an error naming it, before any change.
- A crash at any point leaves a readable table: before the swap nothing changed;
  after it, the files not yet deleted are only orphans.
- ``gc.enabled=false`` refuses expiry (files may be shared with other tables).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from stream_sink.exceptions import MissingFileError, ValidationError
from stream_sink.failpoints import AFTER_EXPIRE_FILES, AFTER_EXPIRE_METADATA, failpoint
from stream_sink.table.commit_lock import commit_lock
from stream_sink.table.manifest import (
    DataFileContent,
    ManifestEntry,
    ManifestFile,
    read_manifest,
    snapshot_manifests,
)
from stream_sink.table.metadata import LogEntry, TableMetadata
from stream_sink.table.retry import RetryPolicy
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot, SnapshotRef
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
GC_ENABLED = "gc.enabled"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 60 * 60 * 1000
T = TypeVar("T")
A = TypeVar("A")


@dataclass(frozen=True)
class ExpireResult:
    """What an expiry did."""

    expired_snapshot_ids: tuple[int, ...] = ()
    removed_refs: tuple[str, ...] = ()
    deleted_data_files: int = 0
    deleted_position_delete_files: int = 0
    deleted_equality_delete_files: int = 0
    deleted_manifests: int = 0
    deleted_manifest_lists: int = 0
    failed_deletes: int = 0

    @property
    def snapshots_expired(self) -> int:
        return len(self.expired_snapshot_ids)

    @property
    def files_deleted(self) -> int:
        return (
            self.deleted_data_files
            + self.deleted_position_delete_files
            + self.deleted_equality_delete_files
            + self.deleted_manifests
            + self.deleted_manifest_lists
        )


@dataclass(frozen=True)
class _Doomed:
    """Files that the new metadata no longer references, by kind."""

    content_files: tuple[tuple[str, DataFileContent], ...]
    manifests: tuple[str, ...]
    manifest_lists: tuple[str, ...]


class ExpireSnapshots:
    """Builder of one expiry; see the module docstring."""

    def __init__(self, table: Table) -> None:
        props = table.properties
        if props.get(GC_ENABLED, "true").strip().lower() == "false":
            raise ValidationError(
                f"cannot expire snapshots of {table.name}: {GC_ENABLED}=false "
                "(its files may be shared with other tables)"
            )
        self._table = table
        self._older_than_ms: int | None = None
        self._retain_last: int | None = None
        self._ids: set[int] = set()
        self._clean = True
        self._delete: Callable[[str], None] = table.io.delete

    def expire_older_than(self, timestamp_ms: int) -> ExpireSnapshots:
        """Expire snapshots older than ``timestamp_ms`` (not in a ref's retained history)."""
        self._older_than_ms = int(timestamp_ms)
        return self

    def retain_last(self, n: int) -> ExpireSnapshots:
        """Keep at least the ``n`` newest snapshots of each branch (n >= 1)."""
        if n < 1:
            raise ValidationError(f"retain_last must be at least 1, got {n}")
        self._retain_last = int(n)
        return self

    def expire_snapshot_id(self, snapshot_id: int) -> ExpireSnapshots:
        self._ids.add(int(snapshot_id))
        return self

    def clean_expired_files(self, clean: bool) -> ExpireSnapshots:
        """Whether to delete the files only expired snapshots used (default True)."""
        self._clean = bool(clean)
        return self

    def delete_with(self, delete: Callable[[str], None]) -> ExpireSnapshots:
        self._delete = delete
        return self

    # --- commit ------------------------------------------------------------------------

    def apply(self, base: TableMetadata | None = None) -> TableMetadata:
        """The metadata the expiry would commit on ``base`` (default: the table's)."""
        base = base if base is not None else self._table.refresh().metadata
        return _expire(base, self._policy(base), self._ids)

    def commit(self) -> ExpireResult:
        policy = RetryPolicy.from_properties(self._table.properties)
        reader = _Manifests(self._table)  # shared by the attempts: a retry reads only new files
        before, after, doomed = policy.run(lambda attempt: self._locked(attempt, reader))
        removed = tuple(
            s.snapshot_id for s in before.snapshots if not after.has_snapshot(s.snapshot_id)
        )
        refs = tuple(sorted(set(before.refs) - set(after.refs)))
        if not removed and not refs:
            return ExpireResult()
        failpoint(AFTER_EXPIRE_METADATA)
        log.info("expired %d snapshots of %s", len(removed), self._table.name)
        result = ExpireResult(expired_snapshot_ids=removed, removed_refs=refs)
        return self._delete_files(doomed, result) if self._clean else result

    def _locked(
        self, attempt: int, reader: _Manifests
    ) -> tuple[TableMetadata, TableMetadata, _Doomed]:
        with commit_lock(self._table.location):
            return self._attempt(attempt, reader)

    def _attempt(
        self, attempt: int, reader: _Manifests
    ) -> tuple[TableMetadata, TableMetadata, _Doomed]:
        table = self._table.refresh()
        base = table.metadata
        new = self.apply(base)
        if len(new.snapshots) == len(base.snapshots) and new.refs == base.refs:
            return base, base, _Doomed((), (), ())
        doomed = _unreferenced(reader, base, new) if self._clean else _Doomed((), (), ())
        location, committed = table.catalog.commit_metadata(
            table.identifier, table.metadata_location, new, base_metadata=base
        )
        table.record_commit(committed, location)
        return base, committed, doomed

    def _policy(self, base: TableMetadata) -> _Policy:
        props = base.properties
        now = int(time.time() * 1000)
        max_age = _int_prop(props, MAX_SNAPSHOT_AGE_MS, DEFAULT_MAX_SNAPSHOT_AGE_MS) or 0
        older_than = self._older_than_ms if self._older_than_ms is not None else now - max_age
        keep = self._retain_last
        if keep is None:
            keep = _int_prop(props, MIN_SNAPSHOTS_TO_KEEP, 1) or 1
        return _Policy(now, older_than, keep, _int_prop(props, MAX_REF_AGE_MS, None))

    def _delete_files(self, doomed: _Doomed, result: ExpireResult) -> ExpireResult:
        counts = {c: 0 for c in DataFileContent}
        failed = 0
        for path, content in doomed.content_files:
            if self._try_delete(path):
                counts[content] += 1
            else:
                failed += 1
        failpoint(AFTER_EXPIRE_FILES)
        manifests = sum(self._try_delete(p) for p in doomed.manifests)
        lists = sum(self._try_delete(p) for p in doomed.manifest_lists)
        failed += len(doomed.manifests) - manifests + len(doomed.manifest_lists) - lists
        return replace(
            result,
            deleted_data_files=counts[DataFileContent.DATA],
            deleted_position_delete_files=counts[DataFileContent.POSITION_DELETES],
            deleted_equality_delete_files=counts[DataFileContent.EQUALITY_DELETES],
            deleted_manifests=manifests,
            deleted_manifest_lists=lists,
            failed_deletes=failed,
        )

    def _try_delete(self, path: str) -> bool:
        try:
            self._delete(path)
            return True
        except OSError as e:  # an orphan at worst: never fail after the commit
            log.warning("could not delete expired file %s: %s", path, e)
            return False


@dataclass(frozen=True)
class _Policy:
    now_ms: int
    older_than_ms: int
    min_snapshots: int
    max_ref_age_ms: int | None


def _int_prop(props: Mapping[str, str], key: str, default: int | None) -> int | None:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(f"table property {key}={raw!r} is not an integer") from None


def _expire(base: TableMetadata, policy: _Policy, explicit: set[int]) -> TableMetadata:
    """Java's RemoveSnapshots.internalApply on ``base``."""
    if not base.snapshots:
        return base
    refs = _retained_refs(base, policy)
    heads = {r.snapshot_id: name for name, r in refs.items()}
    for sid in sorted(explicit):
        if sid in heads:
            raise ValidationError(f"cannot expire snapshot {sid}: ref {heads[sid]!r} points at it")
    keep = set(heads)
    for ref in refs.values():
        keep |= _branch_retained(base, ref, policy) if ref.is_branch else {ref.snapshot_id}
    keep |= _unreferenced_retained(base, refs.values(), policy)
    keep -= explicit
    snapshots = tuple(s for s in base.snapshots if s.snapshot_id in keep)
    if len(snapshots) == len(base.snapshots) and set(refs) == set(base.refs):
        return base
    return replace(
        base,
        snapshots=snapshots,
        refs=refs,
        snapshot_log=_trim_log(base.snapshot_log, keep),
        last_updated_ms=max(policy.now_ms, base.last_updated_ms),
    )


def _retained_refs(base: TableMetadata, policy: _Policy) -> dict[str, SnapshotRef]:
    out = {}
    for name, ref in base.refs.items():
        if name == MAIN_BRANCH or not base.has_snapshot(ref.snapshot_id):
            out[name] = ref
            continue
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else policy.max_ref_age_ms
        age = policy.now_ms - base.snapshot_by_id(ref.snapshot_id).timestamp_ms
        if max_age is None or age <= max_age:
            out[name] = ref
    return out


def _branch_retained(base: TableMetadata, ref: SnapshotRef, policy: _Policy) -> set[int]:
    older_than = (
        policy.now_ms - ref.max_snapshot_age_ms
        if ref.max_snapshot_age_ms is not None
        else policy.older_than_ms
    )
    min_keep = (
        ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else policy.min_snapshots
    )
    kept: set[int] = set()
    for snap in base.ancestors(ref.snapshot_id):
        if len(kept) < min_keep or snap.timestamp_ms >= older_than:
            kept.add(snap.snapshot_id)
        else:
            break
    return kept


def _unreferenced_retained(
    base: TableMetadata, refs: Iterable[SnapshotRef], policy: _Policy
) -> set[int]:
    referenced: set[int] = set()
    for ref in refs:
        if ref.is_branch:
            referenced |= {s.snapshot_id for s in base.ancestors(ref.snapshot_id)}
        else:
            referenced.add(ref.snapshot_id)
    return {
        s.snapshot_id
        for s in base.snapshots
        if s.snapshot_id not in referenced and s.timestamp_ms >= policy.older_than_ms
    }


def _trim_log(entries: tuple[LogEntry, ...], keep: set[int]) -> tuple[LogEntry, ...]:
    out: list[LogEntry] = []
    for e in entries:
        if int(e.value) in keep:
            out.append(e)
        else:
            out.clear()  # a gap would make time travel show the wrong snapshot
    return tuple(out)


# --- which files the new metadata no longer references -------------------------------------


def _unreferenced(reader: _Manifests, before: TableMetadata, after: TableMetadata) -> _Doomed:
    """Files reachable from snapshots ``after`` drops and from no snapshot it keeps.
    Reads every retained manifest first: an unreadable one raises (naming it)."""
    reader.metadata = after
    kept_lists = {s.manifest_list for s in after.snapshots if s.manifest_list}
    kept_manifests: dict[str, ManifestFile] = {}
    for snap in after.snapshots:
        for m in reader.listed(snap):
            kept_manifests[m.manifest_path] = m
    live: set[str] = set()
    for m in kept_manifests.values():
        live.update(e.data_file.file_path for e in reader.entries(m) if e.is_live)
    lists: list[str] = []
    manifests: dict[str, ManifestFile] = {}
    for snap in before.snapshots:
        if after.has_snapshot(snap.snapshot_id) or snap.manifest_list in kept_lists:
            continue
        if snap.manifest_list:  # "" for v1 manifests listed in the metadata itself
            lists.append(snap.manifest_list)
        for m in _or_none(reader.listed, snap) or ():
            if m.manifest_path not in kept_manifests:
                manifests[m.manifest_path] = m
    files: dict[str, DataFileContent] = {}
    for m in manifests.values():
        for e in _or_none(reader.entries, m) or ():
            path = e.data_file.file_path
            if path not in live:
                files[path] = e.data_file.content
    return _Doomed(tuple(files.items()), tuple(manifests), tuple(lists))


def _or_none(read: Callable[[A], list[T]], arg: A) -> list[T] | None:
    """An expired snapshot's list or manifest that is already gone names nothing to delete."""
    try:
        return read(arg)
    except MissingFileError as e:
        log.warning("expiry skips a file that is already missing: %s", e)
        return None


class _Manifests:
    """Reads manifest lists and manifests, each once (files are immutable, so what was
    read for one attempt holds for the next); ``metadata`` gives the specs and schema."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self.metadata: TableMetadata = table.metadata
        self._lists: dict[str, list[ManifestFile]] = {}
        self._entries: dict[str, list[ManifestEntry]] = {}

    def listed(self, snap: Snapshot) -> list[ManifestFile]:
        if not snap.manifest_list:  # v1: manifests listed in the metadata itself
            return snapshot_manifests(self._table.io, snap)
        got = self._lists.get(snap.manifest_list)
        if got is None:
            got = snapshot_manifests(self._table.io, snap)
            self._lists[snap.manifest_list] = got
        return got

    def entries(self, m: ManifestFile) -> list[ManifestEntry]:
        got = self._entries.get(m.manifest_path)
        if got is None:
            spec = self.metadata.spec_by_id(m.partition_spec_id)
            got = read_manifest(self._table.io, m, spec.partition_type(self.metadata.schema))
            self._entries[m.manifest_path] = got
        return got
