"""Before committing what a restored state holds: are its files still there?

A batch staged or pending in state lists data and delete files written by an earlier
run. If one disappeared meanwhile (deleted by hand, by an orphan-file cleanup that
ignored the sink, by a lifecycle rule), committing the batch would make the table
unreadable for every reader. The check runs only on batches read back from state after
a restore (this run's own batches were just written), and stops the sink before the
table is touched, naming the batch and the file.
"""

from __future__ import annotations

from collections.abc import Iterable

from stream_sink.exceptions import MissingFileError

from .shapes import StagedBatch
from .target import CommitTarget


def require_files(target: CommitTarget, sink_id: str, batches: Iterable[StagedBatch]) -> None:
    """Raise MissingFileError for the first file of ``batches`` that does not exist
    (a checkpoint id below 0 marks a pending batch)."""
    for b in batches:
        for path in b.files.all_paths():
            if not target.file_exists(path):
                where = "pending" if b.checkpoint_id < 0 else f"checkpoint {b.checkpoint_id}"
                raise MissingFileError(
                    f"sink {sink_id} (table {target.name}): batch {b.batch_id} ({where}), "
                    "recorded in the operator state before the restart, "
                    f"lists the file {path}, which no longer exists. Nothing was "
                    "committed: committing it would make the table unreadable. Put the file "
                    "back (from a backup) and restart; if it is gone for good, that batch's "
                    "rows are lost: replay them from the source under a new query (a new "
                    "checkpoint location and state directory)"
                )


def missing_staging_manifest(
    sink_id: str, target: CommitTarget, checkpoint_id: int, batch_id: int, cause: MissingFileError
) -> MissingFileError:
    """The error for a staging manifest (phase 1's list of a batch's files) gone missing."""
    return MissingFileError(
        f"sink {sink_id} (table {target.name}): the staging manifest of batch {batch_id} "
        f"(staged checkpoint {checkpoint_id}) is missing ({cause}). The sink wrote it before "
        "the checkpoint to list that batch's files (in the table's metadata directory or "
        "stream-sink.manifests.location); without it the batch cannot be committed. Nothing "
        "was committed. Put the manifest back (from a backup of that directory) and restart; "
        "if it is gone for good, replay the batch from the source under a new query (a new "
        "checkpoint location and state directory). Keep orphan-file cleanup away from "
        "staging manifests"
    )
