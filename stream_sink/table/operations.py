"""Commit operations: fast append, merge append, row delta, replace partitions,
overwrite/rewrite files — each produces exactly one snapshot.

Invariants:
- Every attempt starts from a fresh ``refresh()`` of the table, then runs the
  caller's validation hooks against that metadata and the target branch's head,
  then writes manifests and a manifest list, then asks the catalog to swap.
  A validation failure is final (CommitValidationError), never retried.
- An attempt holds its table's in-process commit lock (``commit_lock``): commits of
  one process to one table never race each other.
- A lost swap (CommitFailedError) deletes that attempt's manifests and list and
  retries per ``commit.retry.*``; an unknown outcome (CommitStateUnknownError)
  is raised as is and nothing is deleted (the files may now be the table).
- Files added in a snapshot are written with a null sequence number and inherit
  the snapshot's; carried-over (EXISTING) entries keep their own.
- A parent manifest holding neither added nor existing files (only entries an earlier
  snapshot deleted) is not carried into the new snapshot (Java's
  ``MergingSnapshotProducer``); manifests this commit wrote always are.
"""

from __future__ import annotations

import functools
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence, TypeVar

from stream_sink.exceptions import (
    CommitFailedError,
    CommitValidationError,
    ConcurrentDeleteReadError,
    ConcurrentDeletionVectorError,
    CorruptMetadataError,
    MissingFileError,
    ValidationError,
)
from stream_sink.io.errors import io_failure, quietly
from stream_sink.table.commit_lock import commit_lock
from stream_sink.table.delete_scope import (
    as_global,
    live_data_spec_ids,
    needs_global_scope,
    with_global_spec,
)
from stream_sink.table.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestListWriter,
    ManifestWriter,
    read_manifest,
    snapshot_manifests,
)
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.retry import RetryPolicy
from stream_sink.table.snapshots import MAIN_BRANCH, Operation, Snapshot, new_snapshot_id
from stream_sink.table.summary import SummaryBuilder
from stream_sink.table.table import Table

Validation = Callable[[TableMetadata, "Snapshot | None"], None]
P = TypeVar("P", bound="SnapshotProducer")


@dataclass(frozen=True)
class PreparedSnapshot:
    """One attempt written up to the catalog swap (:meth:`SnapshotProducer.prepare`)."""

    table: Table
    base: TableMetadata
    base_location: str
    metadata: TableMetadata
    snapshot: Snapshot
    written: tuple[str, ...]


@dataclass(frozen=True)
class _Attempt:
    """What one attempt wrote: removed on a lost race."""

    snapshot: Snapshot
    metadata: TableMetadata
    written: tuple[str, ...]


class SnapshotProducer(ABC):
    """Base of the operations; subclasses say which manifests the new snapshot has."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        self._table = table
        self._branch = branch
        self._properties: dict[str, str] = {}
        self._table_properties: dict[str, str] = {}
        self._validations: list[Validation] = []
        self._before_swap: list[Callable[[], None]] = []
        self._snapshot_id = new_snapshot_id()

    # --- configuration -------------------------------------------------------------

    def set(self: P, key: str, value: str) -> P:
        """A snapshot summary property (e.g. the sink's watermark)."""
        self._properties[str(key)] = str(value)
        return self

    def set_all(self: P, props: dict[str, str]) -> P:
        for k, v in props.items():
            self.set(k, v)
        return self

    def set_table_property(self: P, key: str, value: str) -> P:
        """A table property set in the same metadata commit as the snapshot (atomic with
        it: both land or neither), e.g. a sink's durable watermark record."""
        self._table_properties[str(key)] = str(value)
        return self

    def validate(self: P, check: Validation) -> P:
        """Run ``check(metadata, branch_head)`` after every refresh, before writing;
        it raises (CommitValidationError) to refuse the commit."""
        self._validations.append(check)
        return self

    def before_swap(self: P, hook: Callable[[], None]) -> P:
        """Call ``hook()`` once the new metadata file is written, just before the catalog swap."""
        self._before_swap.append(hook)
        return self

    @property
    def snapshot_id(self) -> int:
        return self._snapshot_id

    # --- what subclasses provide -----------------------------------------------------

    @abstractmethod
    def _operation(self) -> str: ...

    @abstractmethod
    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        """The new snapshot's manifests; every file written is appended to ``out``."""

    def _prepare(self, base: TableMetadata, parent: Snapshot | None) -> TableMetadata:
        """The metadata this attempt's snapshot is built on: ``base``, or ``base`` with
        a change the snapshot needs (e.g. a partition spec its files are registered
        under). The catalog swap still compares against ``base``."""
        return base

    # --- commit ------------------------------------------------------------------------

    def commit(self) -> Snapshot:
        """Commit one snapshot; returns it. See the module invariants."""
        policy = RetryPolicy.from_properties(self._table.properties)
        return policy.run(self._locked_attempt)

    def _locked_attempt(self, attempt: int) -> Snapshot:
        with commit_lock(self._table.location):
            return self._attempt(attempt)

    def _attempt(self, attempt: int) -> Snapshot:
        prepared = self.prepare(attempt)
        table = prepared.table
        try:
            with io_failure(f"table {table.name}: writing metadata under", table.metadata_dir):
                location, committed = table.catalog.commit_metadata(
                    table.identifier,
                    prepared.base_location,
                    prepared.metadata,
                    base_metadata=prepared.base,
                    before_swap=self._run_before_swap,
                )
        except CommitFailedError:
            self.abandon(prepared)
            raise
        return self.landed(prepared, location, committed)

    # --- one attempt in steps (for a commit of several tables at once) -----------------

    def prepare(self, attempt: int) -> PreparedSnapshot:
        """Refresh the table, run the validations on it and write this attempt's
        manifests and manifest list: everything up to the catalog swap. The caller
        swaps ``metadata`` in from ``base_location`` (under the table's commit lock),
        then calls :meth:`landed`, or :meth:`abandon` when the swap lost the race."""
        table = self._table.refresh()
        base = table.metadata
        parent = branch_head(base, self._branch)
        for check in self._validations:
            check(base, parent)
        if base.format_version >= 3:
            base.require_next_row_id()  # before any file is written
        result = self._write(self._prepare(base, parent), parent, attempt)
        return PreparedSnapshot(
            table, base, table.metadata_location, result.metadata, result.snapshot, result.written
        )

    def run_before_swap(self) -> None:
        """The :meth:`before_swap` hooks, for a caller that swaps a prepared attempt."""
        self._run_before_swap()

    def landed(
        self, prepared: PreparedSnapshot, location: str, committed: TableMetadata
    ) -> Snapshot:
        """Adopt the swapped metadata (at ``location``) as the table's; returns the snapshot."""
        prepared.table.record_commit(committed, location)
        return prepared.snapshot

    def abandon(self, prepared: PreparedSnapshot) -> None:
        """Delete what a prepared attempt wrote (its swap failed: nothing references it)."""
        _delete_quietly(prepared.table, prepared.written)

    def _run_before_swap(self) -> None:
        for hook in self._before_swap:
            hook()

    def _write(self, base: TableMetadata, parent: Snapshot | None, attempt: int) -> _Attempt:
        written: list[str] = []
        try:
            with io_failure(
                f"table {self._table.name}: writing manifests under", self._table.metadata_dir
            ):
                return self._write_files(base, parent, attempt, written)
        except BaseException:
            _delete_quietly(self._table, written)
            raise

    def _write_files(
        self, base: TableMetadata, parent: Snapshot | None, attempt: int, written: list[str]
    ) -> _Attempt:
        summary = SummaryBuilder()
        manifests = [m for m in self._manifests(base, parent, summary, written) if self._keeps(m)]
        seq = base.next_sequence_number
        list_path = (
            f"{self._table.metadata_dir}/snap-{self._snapshot_id}-{attempt}-{uuid.uuid4()}.avro"
        )
        writer = ManifestListWriter(
            self._table.io,
            list_path,
            snapshot_id=self._snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=seq,
            format_version=base.format_version,
            first_row_id=base.next_row_id if base.format_version >= 3 else None,
        )
        written.append(list_path)
        writer.add_manifests(manifests)
        writer.close()
        first_row_id, added_rows = _row_range(base, writer)
        snapshot = Snapshot(
            snapshot_id=self._snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=seq,
            timestamp_ms=max(int(time.time() * 1000), base.last_updated_ms),
            manifest_list=list_path,
            summary=summary.build(
                self._operation(), parent.summary if parent else None, self._properties
            ),
            schema_id=base.current_schema_id,
            first_row_id=first_row_id,
            added_rows=added_rows,
        )
        metadata = base.with_snapshot(snapshot, self._branch)
        if self._table_properties:
            metadata = replace(
                metadata.with_properties(self._table_properties),
                last_updated_ms=metadata.last_updated_ms,
            )
        return _Attempt(snapshot, metadata, tuple(written))

    def _keeps(self, m: ManifestFile) -> bool:
        """Java's rule: a manifest goes on when it has live (added or existing) files or
        this commit wrote it; one holding only entries an earlier snapshot deleted is
        dropped (that snapshot's own list keeps it), else every compaction would leave
        its manifests in every later snapshot for ever."""
        return (
            m.has_added_files
            or m.has_existing_files
            or m.added_snapshot_id in (None, self._snapshot_id)
        )

    # --- helpers for subclasses -------------------------------------------------------

    def _parent_manifests(self, parent: Snapshot | None) -> list[ManifestFile]:
        """The parent's manifests, each checked to exist with its recorded length: a
        missing or truncated one is refused instead of being carried into the new
        snapshot (which would make it unreadable too)."""
        if parent is None:
            return []
        manifests = snapshot_manifests(self._table.io, parent)
        for m in manifests:
            _check_carried(self._table, parent, m)
        return manifests

    def _new_manifest(
        self,
        base: TableMetadata,
        spec_id: int,
        content: ManifestContent,
        out: list[str],
    ) -> ManifestWriter:
        path = f"{self._table.metadata_dir}/{uuid.uuid4()}-m{len(out)}.avro"
        out.append(path)
        return ManifestWriter.for_spec(
            self._table.io,
            path,
            base.spec_by_id(spec_id),
            base.schema,
            self._snapshot_id,
            content,
            base.format_version,
        )

    def _write_added(
        self,
        base: TableMetadata,
        files: Sequence[DataFile],
        content: ManifestContent,
        summary: SummaryBuilder,
        out: list[str],
    ) -> list[ManifestFile]:
        """One new manifest per partition spec holding ``files`` as ADDED."""
        by_spec: dict[int, list[DataFile]] = {}
        for f in files:
            by_spec.setdefault(f.spec_id, []).append(f)
        manifests = []
        for spec_id, group in sorted(by_spec.items()):
            writer = self._new_manifest(base, spec_id, content, out)
            for f in group:
                writer.add(f)
                summary.added(f)
            manifests.append(writer.close())
        return manifests

    def _entries(self, manifest: ManifestFile, base: TableMetadata) -> list[ManifestEntry]:
        spec = base.spec_by_id(manifest.partition_spec_id)
        return list(read_manifest(self._table.io, manifest, spec.partition_type(base.schema)))

    def _rewrite_without(
        self,
        base: TableMetadata,
        manifest: ManifestFile,
        remove: Callable[[DataFile], bool],
        summary: SummaryBuilder,
        out: list[str],
    ) -> ManifestFile:
        """``manifest`` again, with live entries matching ``remove`` marked DELETED.
        Returns the manifest unchanged when nothing matches."""
        entries = self._entries(manifest, base)
        live = [e for e in entries if e.status != ManifestEntryStatus.DELETED]
        if not any(remove(e.data_file) for e in live):
            return manifest
        writer = self._new_manifest(
            base, manifest.partition_spec_id, ManifestContent(manifest.content), out
        )
        for e in live:
            if remove(e.data_file):
                writer.delete(e)
                summary.removed(e.data_file)
            else:
                writer.existing(e)
        return writer.close()


def _row_range(base: TableMetadata, writer: ManifestListWriter) -> tuple[int | None, int | None]:
    """v3: the snapshot's first-row-id (the table's next-row-id at this attempt) and
    added-rows (how many ids its manifest list assigned); (None, None) before v3."""
    if base.format_version < 3 or writer.next_row_id is None:
        return None, None
    first = base.require_next_row_id()
    return first, writer.next_row_id - first


def delete_key(f: DataFile) -> tuple[str, int | None]:
    """What identifies a delete file's entry: its path, and for a deletion vector
    (several share one Puffin file) its blob's offset."""
    return (f.file_path, f.content_offset if f.is_deletion_vector else None)


def check_delete_kinds(table: str, format_version: int, deletes: Iterable[DataFile]) -> None:
    """v3 forbids new position delete files (deletion vectors replace them); before v3
    there are no deletion vectors. Either mismatch is a ValidationError naming the file."""
    for f in deletes:
        if f.content != DataFileContent.POSITION_DELETES:
            continue
        if format_version >= 3 and not f.is_deletion_vector:
            raise ValidationError(
                f"table {table} is format version 3, where position delete files are not "
                f"allowed ({f.file_path}); write deletion vectors instead"
            )
        if format_version < 3 and f.is_deletion_vector:
            raise ValidationError(
                f"deletion vector {f.file_path} needs a format version 3 table; table "
                f"{table} is v{format_version} (upgrade_format_version(3))"
            )


def _delete_quietly(table: Table, paths: Iterable[str]) -> None:
    """Delete files of a failed attempt; a failure only logs (never hides the cause)."""
    for path in paths:
        quietly(functools.partial(table.io.delete, path), f"deleting unused file {path}")


_VERIFIED: set[tuple[str, int]] = set()
"""Manifests (path, length) already found intact by this process (manifests are never
rewritten in place, so one check per process is enough)."""
_VERIFIED_CAP = 200_000


def _check_carried(table: Table, parent: Snapshot, m: ManifestFile) -> None:
    key = (m.manifest_path, m.manifest_length)
    if key in _VERIFIED:
        return
    try:
        size = table.io.size(m.manifest_path)
    except MissingFileError:
        size = None
    if size != m.manifest_length:
        found = "is missing" if size is None else f"has {size} bytes"
        error = MissingFileError if size is None else CorruptMetadataError
        raise error(
            f"table {table.name}: manifest {m.manifest_path} of the current snapshot "
            f"{parent.snapshot_id} {found}, but its manifest list records "
            f"{m.manifest_length} bytes; refusing to carry it into a new snapshot. Nothing "
            "was committed. Restore the manifest from a backup before writing to the table "
            "again (readers of the current snapshot fail on it too)"
        )
    if len(_VERIFIED) >= _VERIFIED_CAP:
        _VERIFIED.clear()
    _VERIFIED.add(key)


def branch_head(base: TableMetadata, branch: str) -> Snapshot | None:
    """The snapshot a commit to ``branch`` builds on: the branch head, or for a
    branch that does not exist yet the current snapshot (it forks from main), as Java."""
    if branch in base.refs:
        return base.snapshot_for_ref(branch)
    return base.current_snapshot()


def _check_files(files: Iterable[DataFile], content: Iterable[DataFileContent], what: str) -> None:
    allowed = set(content)
    for f in files:
        if f.content not in allowed:
            raise ValidationError(f"{what} cannot take {f.content.name} file {f.file_path}")


class FastAppend(SnapshotProducer):
    """Add data files in a new manifest; every existing manifest is kept as is."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._files: list[DataFile] = []

    def append_file(self, f: DataFile) -> FastAppend:
        _check_files([f], [DataFileContent.DATA], "an append")
        self._files.append(f)
        return self

    def append_files(self, files: Iterable[DataFile]) -> FastAppend:
        for f in files:
            self.append_file(f)
        return self

    def _operation(self) -> str:
        return Operation.APPEND

    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        added = self._write_added(base, self._files, ManifestContent.DATA, summary, out)
        return added + self._parent_manifests(parent)


class MergeAppend(FastAppend):
    """An append that then merges small data manifests (``commit.manifest-merge.enabled``,
    ``commit.manifest.min-count-to-merge``, ``commit.manifest.target-size-bytes``)."""

    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        manifests = super()._manifests(base, parent, summary, out)
        return merge_manifests(self, base, manifests, out)


def merge_manifests(
    producer: SnapshotProducer, base: TableMetadata, manifests: list[ManifestFile], out: list[str]
) -> list[ManifestFile]:
    """Pack data manifests of each spec into bins of the target size and rewrite
    every bin of two or more, once a spec has at least min-count-to-merge of them."""
    props = base.properties
    min_count = int(props.get("commit.manifest.min-count-to-merge", "100"))
    target = int(props.get("commit.manifest.target-size-bytes", str(8 * 1024 * 1024)))
    result: list[ManifestFile] = [m for m in manifests if m.content != ManifestContent.DATA]
    by_spec: dict[int, list[ManifestFile]] = {}
    for m in manifests:
        if m.content == ManifestContent.DATA:
            by_spec.setdefault(m.partition_spec_id, []).append(m)
    merged: list[ManifestFile] = []
    for spec_id, group in by_spec.items():
        if len(group) < min_count:
            merged.extend(group)
            continue
        for bin_ in _bins(group, target):
            if len(bin_) == 1:
                merged.extend(bin_)
                continue
            writer = producer._new_manifest(base, spec_id, ManifestContent.DATA, out)
            for m in bin_:
                for e in producer._entries(m, base):
                    if e.status == ManifestEntryStatus.DELETED:
                        continue
                    if (
                        e.status == ManifestEntryStatus.ADDED
                        and e.snapshot_id == producer.snapshot_id
                    ):
                        writer.add(e.data_file)
                    else:
                        writer.existing(e)
            merged.append(writer.close())
    return merged + result


def _bins(manifests: list[ManifestFile], target: int) -> list[list[ManifestFile]]:
    bins: list[list[ManifestFile]] = []
    size = 0
    for m in manifests:
        if bins and size + m.manifest_length <= target:
            bins[-1].append(m)
            size += m.manifest_length
        else:
            bins.append([m])
            size = m.manifest_length
    return bins


class RowDelta(SnapshotProducer):
    """Add data files and delete files (position and/or equality) in one snapshot.

    An equality delete is registered under an unpartitioned spec when the parent
    snapshot has live data files of another spec than its own, so that it reaches every
    older row of its keys (:mod:`stream_sink.table.delete_scope`).

    v3: position deletes are deletion vectors only; at most one per data file lives in
    a snapshot, so a vector for a data file that already has one must come with
    ``remove_deletes`` of the old one (merged into it by the caller), and a vector a
    concurrent commit added for the same data file fails the commit
    (ConcurrentDeletionVectorError, Java's ``validateAddedDVs``)."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._data: list[DataFile] = []
        self._deletes: list[DataFile] = []
        self._removed_deletes: set[tuple[str, int | None]] = set()
        self._referenced: set[str] = set()
        self._starting_snapshot_id: int | None = None
        self._scoped: list[DataFile] = []  # the deletes as this attempt registers them
        self._remove_all = False

    def remove_all_files(self) -> RowDelta:
        """Remove every data and delete file live on the branch this snapshot is built on
        (decided at each attempt, after every refresh), before the files it adds: a
        table truncated and written again in one snapshot. Its equality deletes then
        apply to nothing (no older data is left), its position deletes to its own rows."""
        self._remove_all = True
        return self

    def add_rows(self, f: DataFile) -> RowDelta:
        _check_files([f], [DataFileContent.DATA], "a row delta's data")
        self._data.append(f)
        return self

    def add_deletes(self, f: DataFile) -> RowDelta:
        _check_files(
            [f],
            [DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES],
            "a row delta's deletes",
        )
        self._deletes.append(f)
        return self

    def remove_deletes(self, f: DataFile) -> RowDelta:
        """Remove delete file ``f`` (a deletion vector: only that vector of its Puffin
        file) in this snapshot; the commit fails if it is no longer live."""
        _check_files(
            [f],
            [DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES],
            "a row delta's removed deletes",
        )
        self._removed_deletes.add(delete_key(f))
        return self

    def validate_data_files_exist(
        self, paths: Iterable[str], starting_snapshot_id: int | None
    ) -> RowDelta:
        """Refuse the commit if a data file that position deletes point at was
        removed by a snapshot committed after ``starting_snapshot_id``."""
        self._referenced.update(paths)
        self._starting_snapshot_id = starting_snapshot_id
        if self._referenced:
            self.validate(self._check_referenced)
        return self

    def _check_referenced(self, base: TableMetadata, head: Snapshot | None) -> None:
        for snap in base.ancestors(head.snapshot_id if head else None):
            if snap.snapshot_id == self._starting_snapshot_id:
                return
            if snap.operation == Operation.APPEND:
                continue
            for m in snapshot_manifests(self._table.io, snap):
                if m.added_snapshot_id != snap.snapshot_id or not m.has_deleted_files:
                    continue
                for e in self._entries(m, base):
                    if (
                        e.status == ManifestEntryStatus.DELETED
                        and e.data_file.file_path in self._referenced
                    ):
                        raise CommitValidationError(
                            f"data file {e.data_file.file_path} referenced by position deletes "
                            f"was removed by snapshot {snap.snapshot_id}"
                        )

    def _operation(self) -> str:
        if self._remove_all:
            return Operation.OVERWRITE if self._data else Operation.DELETE
        if self._deletes:
            return Operation.OVERWRITE if self._data else Operation.DELETE
        return Operation.APPEND

    def _prepare(self, base: TableMetadata, parent: Snapshot | None) -> TableMetadata:
        """Decide, on the metadata of this attempt, which equality deletes must reach data
        files of other specs (:mod:`stream_sink.table.delete_scope`); add an unpartitioned
        spec for them when the table has none."""
        self._scoped = list(self._deletes)
        if (
            self._remove_all
            or parent is None
            or not any(f.content == DataFileContent.EQUALITY_DELETES for f in self._deletes)
        ):
            return base
        live = live_data_spec_ids(self._parent_manifests(parent))
        wide = [needs_global_scope(f, live, base) for f in self._deletes]
        if not any(wide):
            return base
        metadata, spec_id = with_global_spec(base)
        self._scoped = [
            as_global(f, spec_id) if w else f for f, w in zip(self._deletes, wide, strict=True)
        ]
        return metadata

    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        if base.format_version < 2 and self._deletes:
            raise ValidationError(f"delete files need a v2 table; {self._table.name} is v1")
        check_delete_kinds(self._table.name, base.format_version, self._deletes)
        parents = self._parent_manifests(parent)
        if self._remove_all:
            parents = [self._rewrite_without(base, m, _every, summary, out) for m in parents]
        elif self._removed_deletes or self._dvs_on_older_files():
            parents = self._replace_vectors(base, parents, summary, out)
        added = self._write_added(base, self._data, ManifestContent.DATA, summary, out)
        added += self._write_added(base, self._scoped, ManifestContent.DELETES, summary, out)
        return added + parents

    def _dvs_on_older_files(self) -> set[str]:
        """Data files of earlier snapshots this delta adds deletion vectors for."""
        mine = {f.file_path for f in self._data}
        return {
            str(f.referenced_data_file)
            for f in self._deletes
            if f.is_deletion_vector and f.referenced_data_file not in mine
        }

    def _check_vector_targets(
        self, base: TableMetadata, parents: list[ManifestFile], targets: set[str]
    ) -> None:
        """Every data file a new vector names must be live in the parent (else the
        vector points at nothing: a data file removed meanwhile, or a wrong path)."""
        if not targets:
            return
        live = {
            e.data_file.file_path
            for m in parents
            if m.content == ManifestContent.DATA
            for e in self._entries(m, base)
            if e.is_live and e.data_file.file_path in targets
        }
        gone = sorted(targets - live)
        if gone:
            raise ConcurrentDeleteReadError(
                f"table {self._table.name}: deletion vectors point at data files that are "
                f"not in the table (removed by a concurrent commit, or a wrong path): {gone[:5]}"
            )

    def _replace_vectors(
        self,
        base: TableMetadata,
        parents: list[ManifestFile],
        summary: SummaryBuilder,
        out: list[str],
    ) -> list[ManifestFile]:
        """The parent's manifests with the removed deletes marked DELETED; refuses a
        vector for a data file whose live vector is not removed here (concurrently
        added, or not merged), and a removed delete that is no longer live."""
        targets, found = self._dvs_on_older_files(), set()

        def remove(f: DataFile) -> bool:
            key = delete_key(f)
            if key in self._removed_deletes:
                found.add(key)
                return True
            if f.is_deletion_vector and f.referenced_data_file in targets:
                raise ConcurrentDeletionVectorError(
                    f"table {self._table.name}: data file {f.referenced_data_file} already "
                    f"has a deletion vector (in {f.file_path}, added by a commit this one "
                    "did not read); re-read it, merge and retry"
                )
            return False

        self._check_vector_targets(base, parents, targets)
        kept = [
            m
            if m.content == ManifestContent.DATA
            else self._rewrite_without(base, m, remove, summary, out)
            for m in parents
        ]
        missing = self._removed_deletes - found
        if missing:
            raise ConcurrentDeleteReadError(
                f"table {self._table.name}: delete files to replace are no longer live "
                f"(removed by a concurrent commit): {sorted(p for p, _ in missing)[:5]}"
            )
        return kept


def _every(f: DataFile) -> bool:
    return True


class ReplacePartitions(SnapshotProducer):
    """Dynamic partition overwrite: every partition that an added file belongs to
    loses its current data and delete files; an unpartitioned table loses all."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._files: list[DataFile] = []

    def add_file(self, f: DataFile) -> ReplacePartitions:
        _check_files([f], [DataFileContent.DATA], "replace partitions")
        self._files.append(f)
        return self

    def _operation(self) -> str:
        return Operation.OVERWRITE

    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        replaced = {(f.spec_id, tuple(f.partition)) for f in self._files}
        unpartitioned = any(base.spec_by_id(f.spec_id).is_unpartitioned for f in self._files)

        def remove(f: DataFile) -> bool:
            return unpartitioned or (f.spec_id, tuple(f.partition)) in replaced

        kept = [
            self._rewrite_without(base, m, remove, summary, out)
            for m in self._parent_manifests(parent)
        ]
        added = self._write_added(base, self._files, ManifestContent.DATA, summary, out)
        return added + kept


class OverwriteFiles(SnapshotProducer):
    """Remove named files and add others in one snapshot (compaction, rewrites).

    ``rewrite=True`` records the ``replace`` operation (same rows, new files)."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH, rewrite: bool = False) -> None:
        super().__init__(table, branch)
        self._added: list[DataFile] = []
        self._removed: set[str] = set()
        self._rewrite = rewrite

    def add_file(self, f: DataFile) -> OverwriteFiles:
        self._added.append(f)
        return self

    def delete_file(self, f: DataFile | str) -> OverwriteFiles:
        self._removed.add(f if isinstance(f, str) else f.file_path)
        return self

    def _operation(self) -> str:
        return Operation.REPLACE if self._rewrite else Operation.OVERWRITE

    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        found: set[str] = set()

        def remove(f: DataFile) -> bool:
            if f.file_path in self._removed:
                found.add(f.file_path)
                return True
            return False

        kept = [
            self._rewrite_without(base, m, remove, summary, out)
            for m in self._parent_manifests(parent)
        ]
        missing = self._removed - found
        if missing:
            raise CommitValidationError(
                f"cannot remove files that are not in table {self._table.name}: "
                f"{sorted(missing)[:5]}"
            )
        data = [f for f in self._added if f.content == DataFileContent.DATA]
        deletes = [f for f in self._added if f.content != DataFileContent.DATA]
        added = self._write_added(base, data, ManifestContent.DATA, summary, out)
        added += self._write_added(base, deletes, ManifestContent.DELETES, summary, out)
        return added + kept
