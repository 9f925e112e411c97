"""Rewrite files: replace data (and delete) files by others holding the same live rows,
as one ``replace`` snapshot (Java's ``RewriteFiles`` / ``BaseRewriteFiles``).

Use::

    table.new_rewrite(branch="main")
        .rewrite_files(data_to_remove, data_to_add, deletes_to_remove, deletes_to_add)
        .validate_from_snapshot(planned_snapshot_id)
        .data_sequence_number(planned_snapshot.sequence_number)   # optional
        .commit()

Invariants:
- Every file to remove must be live on the branch head the commit builds on; one
  that is not (another commit, e.g. an identical compaction, already removed it)
  refuses the commit with CommitValidationError.
- Conflict check (Java's ``validateNoNewDeletesForDataFiles``), run after every
  refresh: the delete files added by ``overwrite``/``delete`` snapshots after the
  starting snapshot (``validate_from_snapshot``; without it, the whole history)
  are indexed, and each replaced data file is looked up in that index as if it had
  the starting snapshot's sequence number (partition, spec and file bounds decide,
  as Java's delete index). With ``data_sequence_number`` set, only position deletes
  conflict, and a partitioned equality delete when the added files have another
  partition spec than the replaced ones (it would not reach their rows): other equality
  deletes committed meanwhile keep applying to the added files, whose data sequence
  number is the old one. Without it, any such delete conflicts.
- Added data files get ``data_sequence_number`` when set (their file sequence number
  is still the new snapshot's); added delete files inherit the new snapshot's.
- Besides the delete files named, the commit drops delete files that can no longer
  apply to anything: position deletes naming only removed data files, and every
  delete file whose data sequence number is below that of every live data file
  (Java drops those too).
- v3: a deletion vector added for a data file whose live vector is not among the
  deletes removed fails the commit (ConcurrentDeletionVectorError): one vector per
  data file.
- Files keep their partition spec id: data of older specs is written to manifests
  of that spec.
- A refused or failed commit deletes the manifests and manifest list it wrote.
  The data and delete files named here belong to the caller: the operation never
  deletes them, neither the added ones on failure nor the removed ones on success
  (snapshot expiry removes those once no snapshot references them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from stream_sink.exceptions import (
    CommitValidationError,
    ConcurrentDeletionVectorError,
    ValidationError,
)
from stream_sink.failpoints import AFTER_REWRITE_COMMIT, BEFORE_REWRITE_SWAP, failpoint
from stream_sink.table.delete_index import DeleteIndex, single_path
from stream_sink.table.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntryStatus,
    ManifestFile,
)
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.operations import SnapshotProducer, check_delete_kinds, delete_key
from stream_sink.table.snapshots import MAIN_BRANCH, Operation, Snapshot
from stream_sink.table.summary import SummaryBuilder
from stream_sink.table.table import Table
from stream_sink.table.types import IcebergType

# snapshots whose added delete files a rewrite must check (Java's
# VALIDATE_ADDED_DELETE_FILES_OPERATIONS)
_DELETE_ADDING_OPERATIONS = (Operation.OVERWRITE, Operation.DELETE)

_RemoveDelete = Callable[[DataFile, "int | None"], bool]
"""Decides which live entries of a delete manifest a rewrite drops (file, data seq)."""


class RewriteFiles(SnapshotProducer):
    """Replace files by files with the same rows; see the module docstring."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._data_remove: dict[str, DataFile] = {}
        self._data_add: list[DataFile] = []
        self._deletes_remove: dict[tuple[str, int | None], DataFile] = {}
        self._deletes_add: list[DataFile] = []
        self._starting_snapshot_id: int | None = None
        self._data_seq: int | None = None
        self.validate(self._check_no_new_deletes)
        self.before_swap(lambda: failpoint(BEFORE_REWRITE_SWAP))

    # --- configuration -------------------------------------------------------------

    def rewrite_files(
        self,
        data_to_remove: Iterable[DataFile],
        data_to_add: Iterable[DataFile],
        deletes_to_remove: Iterable[DataFile] = (),
        deletes_to_add: Iterable[DataFile] = (),
    ) -> RewriteFiles:
        """Replace ``data_to_remove`` by ``data_to_add`` (same live rows) and
        ``deletes_to_remove`` by ``deletes_to_add``. May be called several times."""
        for f in data_to_remove:
            _require(f, data=True, what="data_to_remove")
            self._data_remove[f.file_path] = f
        for f in data_to_add:
            _require(f, data=True, what="data_to_add")
            self._data_add.append(f)
        for f in deletes_to_remove:
            _require(f, data=False, what="deletes_to_remove")
            self._deletes_remove[delete_key(f)] = f
        for f in deletes_to_add:
            _require(f, data=False, what="deletes_to_add")
            self._deletes_add.append(f)
        return self

    def validate_from_snapshot(self, snapshot_id: int) -> RewriteFiles:
        """Check for conflicts only in snapshots committed after ``snapshot_id`` (the
        snapshot the rewrite was planned on)."""
        self._starting_snapshot_id = int(snapshot_id)
        return self

    def data_sequence_number(self, sequence_number: int) -> RewriteFiles:
        """Give the added data files this data sequence number (use the starting
        snapshot's: equality deletes committed since keep applying to them)."""
        if sequence_number < 0:
            raise ValidationError(f"data sequence number must be >= 0, got {sequence_number}")
        self._data_seq = int(sequence_number)
        return self

    def commit(self) -> Snapshot:
        snapshot = super().commit()
        failpoint(AFTER_REWRITE_COMMIT)
        return snapshot

    # --- the snapshot ----------------------------------------------------------------

    def _operation(self) -> str:
        return Operation.REPLACE

    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        self._check_arguments(base)
        parents = self._parent_manifests(parent)
        found: set[str] = set()

        def remove_data(f: DataFile) -> bool:
            hit = f.file_path in self._data_remove
            if hit:
                found.add(f.file_path)
            return hit

        data = [
            self._rewrite_without(base, m, remove_data, summary, out)
            for m in parents
            if m.content == ManifestContent.DATA
        ]
        added = self._write_data(base, summary, out)
        min_data_seq = _min_live_sequence(data, added, self._data_seq, base.next_sequence_number)

        found_deletes: set[tuple[str, int | None]] = set()
        vector_targets = {f.referenced_data_file for f in self._deletes_add if f.is_deletion_vector}

        def remove_delete(f: DataFile, seq: int | None) -> bool:
            if delete_key(f) in self._deletes_remove:
                found_deletes.add(delete_key(f))
                return True
            if f.is_deletion_vector and f.referenced_data_file in vector_targets:
                raise ConcurrentDeletionVectorError(
                    f"rewrite of {self._table.name} refused: data file "
                    f"{f.referenced_data_file} got a deletion vector ({f.file_path}) this "
                    "rewrite did not merge; re-plan from the current snapshot"
                )
            return self._dangling(f, seq, min_data_seq)

        deletes = [
            self._rewrite_deletes(base, m, remove_delete, summary, out)
            for m in parents
            if m.content == ManifestContent.DELETES
        ]
        self._check_found(found, found_deletes, parent)
        added += self._write_added(base, self._deletes_add, ManifestContent.DELETES, summary, out)
        return added + data + deletes

    def _check_arguments(self, base: TableMetadata) -> None:
        """Java's ``validateReplacedAndAddedFiles``: caller mistakes, not conflicts."""
        if not self._data_remove and not self._deletes_remove:
            raise ValidationError(f"a rewrite of {self._table.name} must remove some file")
        if self._data_add and not self._data_remove:
            raise ValidationError("data files to add need data files to replace")
        if self._deletes_add and not self._deletes_remove:
            raise ValidationError("delete files to add need delete files to replace")
        if base.format_version < 2 and (self._deletes_add or self._deletes_remove):
            raise ValidationError(f"delete files need a v2 table; {self._table.name} is v1")
        check_delete_kinds(self._table.name, base.format_version, self._deletes_add)
        if self._data_seq is not None and self._data_seq > base.last_sequence_number:
            raise ValidationError(
                f"data sequence number {self._data_seq} is above the last sequence number "
                f"{base.last_sequence_number} of {self._table.name}; use the planned snapshot's"
            )

    def _check_found(
        self, found: set[str], found_deletes: set[tuple[str, int | None]], parent: Snapshot | None
    ) -> None:
        missing = (set(self._data_remove) - found) | {
            p for p, _ in set(self._deletes_remove) - found_deletes
        }
        if missing:
            head = parent.snapshot_id if parent else None
            raise CommitValidationError(
                f"rewrite of {self._table.name} refused: {len(missing)} file(s) to replace are "
                f"no longer live at snapshot {head} (another commit, e.g. a concurrent "
                f"rewrite, removed them): {sorted(missing)[:3]}; re-plan from the current snapshot"
            )

    def _write_data(
        self, base: TableMetadata, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        by_spec: dict[int, list[DataFile]] = {}
        for f in self._data_add:
            by_spec.setdefault(f.spec_id, []).append(f)
        manifests = []
        for spec_id, group in sorted(by_spec.items()):
            writer = self._new_manifest(base, spec_id, ManifestContent.DATA, out)
            for f in group:
                writer.add(f, sequence_number=self._data_seq)
                summary.added(f)
            manifests.append(writer.close())
        return manifests

    def _dangling(self, f: DataFile, seq: int | None, min_data_seq: int | None) -> bool:
        """A delete file that can no longer apply to any live data file."""
        if f.content == DataFileContent.POSITION_DELETES:
            path = single_path(f)
            if path is not None and path in self._data_remove:
                return True
        return seq is not None and min_data_seq is not None and seq < min_data_seq

    def _rewrite_deletes(
        self,
        base: TableMetadata,
        manifest: ManifestFile,
        remove: _RemoveDelete,
        summary: SummaryBuilder,
        out: list[str],
    ) -> ManifestFile:
        entries = [e for e in self._entries(manifest, base) if e.is_live]
        if not any(remove(e.data_file, e.sequence_number) for e in entries):
            return manifest
        writer = self._new_manifest(base, manifest.partition_spec_id, ManifestContent.DELETES, out)
        for e in entries:
            if remove(e.data_file, e.sequence_number):
                writer.delete(e)
                summary.removed(e.data_file)
            else:
                writer.existing(e)
        return writer.close()

    # --- conflicts ---------------------------------------------------------------------

    def _check_no_new_deletes(self, base: TableMetadata, parent: Snapshot | None) -> None:
        """Java's ``validateNoNewDeletesForDataFiles``; see the module docstring."""
        if parent is None or base.format_version < 2 or not self._data_remove:
            return
        index = DeleteIndex({s.spec_id: s for s in base.partition_specs}, _field_types(base))
        for seq, f in self._added_deletes(base, parent):
            index.add(seq, f)
        if not index:
            return
        start = self._starting_snapshot_id
        start_seq = (
            base.snapshot_by_id(start).sequence_number
            if start is not None and base.has_snapshot(start)
            else 0
        )
        for data in self._data_remove.values():
            hits = index.for_data_file(start_seq, data)
            if self._data_seq is not None:
                hits = [d for d in hits if not self._still_applies(d, base)]
            if hits:
                kind = "position delete" if self._data_seq is not None else "delete"
                raise CommitValidationError(
                    f"rewrite of {self._table.name} refused: new {kind} file "
                    f"{hits[0].file_path} (committed after snapshot {start}) applies to "
                    f"replaced data file {data.file_path}; re-plan from the current snapshot"
                )

    def _still_applies(self, delete: DataFile, base: TableMetadata) -> bool:
        """Whether ``delete``, committed after the starting snapshot, reaches the rewritten
        rows in the added files as it reached them in the replaced ones: an equality
        delete does when it is global or every added file keeps its spec (rows then keep
        their partition); never a position delete (it names the replaced file)."""
        if delete.content != DataFileContent.EQUALITY_DELETES:
            return False
        if base.spec_by_id(delete.spec_id).is_unpartitioned:
            return True
        return all(f.spec_id == delete.spec_id for f in self._data_add)

    def _added_deletes(
        self, base: TableMetadata, parent: Snapshot
    ) -> Iterable[tuple[int, DataFile]]:
        """(data sequence number, file) of the delete files added by the snapshots after
        the starting one, in the ancestry of ``parent``."""
        start = self._starting_snapshot_id
        last: Snapshot | None = None
        history: list[Snapshot] = []
        for snap in base.ancestors(parent.snapshot_id):
            if snap.snapshot_id == start:
                break
            last = snap
            history.append(snap)
        if start is not None and last is not None and last.parent_snapshot_id != start:
            raise CommitValidationError(
                f"rewrite of {self._table.name} refused: cannot determine the history between "
                f"starting snapshot {start} and snapshot {last.snapshot_id} (expired?); "
                "re-plan from the current snapshot"
            )
        for snap in history:
            if snap.operation not in _DELETE_ADDING_OPERATIONS:
                continue
            for m in self._parent_manifests(snap):
                if m.content != ManifestContent.DELETES or m.added_snapshot_id != snap.snapshot_id:
                    continue
                for e in self._entries(m, base):
                    if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snap.snapshot_id:
                        yield (e.sequence_number or 0), e.data_file


def _require(f: DataFile, *, data: bool, what: str) -> None:
    if f.is_delete == data:
        kind = "a data" if data else "a delete"
        raise ValidationError(f"{what} takes {kind} file; {f.file_path} is {f.content.name}")


def _field_types(base: TableMetadata) -> dict[int, IcebergType]:
    return {
        f.field_id: f.field_type
        for schema in sorted(base.schemas, key=lambda s: s.schema_id)
        for f in schema.leaf_fields()
    }


def _min_live_sequence(
    data: Sequence[ManifestFile], added: Sequence[ManifestFile], data_seq: int | None, new_seq: int
) -> int | None:
    """The lowest data sequence number of any live data file after the rewrite (None:
    unknown, nothing is dropped by age)."""
    seqs: list[int] = []
    for m in data:
        if not (m.has_added_files or m.has_existing_files):
            continue
        if m.min_sequence_number is None:
            return None
        seqs.append(m.min_sequence_number)
    for m in added:
        if m.added_files_count:
            seqs.append(data_seq if data_seq is not None else new_seq)
    return min(seqs) if seqs else new_seq
