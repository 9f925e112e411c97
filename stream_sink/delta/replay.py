"""Building snapshots from the log: newest checkpoint at or below the version, then the
JSON commits after it, which must be contiguous.

Invariants: a gap in the commit versions, a torn commit or an unreadable checkpoint is
an error naming the version, never a silently shorter history.
"""

from __future__ import annotations

from stream_sink.exceptions import CorruptMetadataError, NoSuchTableError

from .checkpoint import read_checkpoint
from .log import DeltaLog
from .snapshot import DeltaSnapshot, SnapshotBuilder


def load_snapshot(log: DeltaLog, version: int | None = None) -> DeltaSnapshot:
    """The table's state at ``version`` (default: the newest)."""
    listing = log.list_log()
    commits, checkpoints = listing.commits, sorted(listing.checkpoints)
    if not commits and not checkpoints:
        raise NoSuchTableError(f"no Delta table at {log.location} (no {log.log_dir})")
    newest = max(commits[-1] if commits else -1, checkpoints[-1] if checkpoints else -1)
    target = newest if version is None else version
    if target > newest or target < 0:
        raise NoSuchTableError(
            f"Delta table {log.location} has versions up to {newest}; version {target} "
            "does not exist"
        )
    base = _checkpoint_base(checkpoints, target)
    builder = (
        SnapshotBuilder(log.location)
        if base is None
        else SnapshotBuilder(log.location).apply(
            base, read_checkpoint(log, base, listing.checkpoints[base])
        )
    )
    start = -1 if base is None else base
    have = set(commits)
    for v in range(start + 1, target + 1):
        if v not in have:
            raise CorruptMetadataError(
                f"Delta table {log.location}: version {v} is missing from the log "
                f"(needed to reach version {target})"
            )
        builder.apply(v, log.read_commit(v))
    return builder.build()


def _checkpoint_base(checkpoints: list[int], target: int) -> int | None:
    """The newest checkpoint at or below ``target`` (listed: ``_last_checkpoint`` is only a
    hint for stores where listing is slow)."""
    usable = [c for c in checkpoints if c <= target]
    return usable[-1] if usable else None


def update_snapshot(log: DeltaLog, snapshot: DeltaSnapshot) -> tuple[DeltaSnapshot, list[int]]:
    """``snapshot`` moved to the newest version; also the versions applied."""
    newer = [v for v in log.list_commits() if v > snapshot.version]
    if not newer:
        return snapshot, []
    builder = SnapshotBuilder.of(snapshot)
    applied = []
    for v in range(snapshot.version + 1, newer[-1] + 1):
        if v not in newer:
            raise CorruptMetadataError(f"Delta table {log.location}: version {v} is missing")
        builder.apply(v, log.read_commit(v))
        applied.append(v)
    return builder.build(), applied
