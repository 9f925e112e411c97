"""The target interface: what the commit protocol needs from a table format.

The FilesCommitter (pending -> staged -> checkpoint -> commit, replay, loss detection,
failpoints, metrics) is format-agnostic; a table format plugs in by implementing
:class:`CommitTarget`:
- ``decode`` a batch's files from the bytes the executors produced (kept in
  ``pending/<batch>``),
- ``stage`` a batch's files durably and return the small payload ``staged/<ckpt>``
  keeps (Iceberg: staging manifests; Delta: the batch's add/remove actions themselves),
  ``unstage`` to read them back, ``release`` / ``sweep`` to clean staging artifacts up,
- ``watermark`` for (job, operator) on the table as it is now,
- ``commit`` a group of staged batches as one table version stamped with the watermark,
  validated at commit time against what other writers committed meanwhile,
- ``delete_unreferenced`` files of a refused replay (never one the table references),
- ``committed``: the format's own handle its commits go through (Iceberg: the ``Table``;
  Delta: the ``DeltaTable``), handed to the front door after each checkpoint's commits.
- ``source_position``: the query offsets its last commit recorded (``group.offsets``,
  written by ``commit`` in the same version; :mod:`.source_position`).

Invariants every implementation keeps: a commit either lands whole (data and watermark
in the same table version) or not at all; ``commit`` returns the refusing watermark
instead of committing when the (job, operator) already committed at or above the group's
lowest batch; ``delete_unreferenced`` deletes nothing when it cannot be sure.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from stream_sink.checkpoints.metadata import TableIdentity
from stream_sink.metrics.committer import CommitterMetrics

if TYPE_CHECKING:
    from .shapes import CommitGroup
    from .source_position import SourcePosition

INITIAL_WATERMARK = -1
"""The watermark of a (job, operator) that committed nothing yet."""
MAX_CONTINUOUS_EMPTY_COMMITS = "stream-sink.max-continuous-empty-commits"
"""Table property: every that many empty checkpoints, an empty commit moves the watermark."""

Handle = TypeVar("Handle")
"""A format's table handle (Iceberg's ``Table``, Delta's ``DeltaTable``): the protocol
passes it through to the front door without knowing its format."""


class BatchFiles(Protocol):
    """What one batch wrote, in a format's own terms (Iceberg: WriteResult)."""

    @property
    def is_empty(self) -> bool: ...

    @property
    def delete_files(self) -> Sequence[Any]:
        """Files (or actions) that delete rows; empty for a plain append."""
        ...

    @property
    def truncate(self) -> bool:
        """The commit of this batch empties the table first (a TRUNCATE of the source)."""
        ...

    def all_paths(self) -> list[str]: ...

    def to_bytes(self) -> bytes: ...


@dataclass(frozen=True)
class StagingNamer:
    """Who stages: the ids and a token unique to one lineage of operator state, so that
    two instances racing on the same (job, operator) never share staging artifacts and a
    restart of the same state reuses (overwrites) its crashed attempt's names."""

    job_id: str
    operator_id: str
    token: str


def new_instance_token() -> str:
    """A token naming one committer instance's staging artifacts (8 hex digits)."""
    return uuid.uuid4().hex[:8]


class CommitTarget(ABC, Generic[Handle]):
    """A table format behind the commit protocol (see module docstring)."""

    @property
    @abstractmethod
    def committed(self) -> Handle:
        """The handle the target's commits go through, as its last commit left it (the
        front door's own unless pipelined); read on the commit's thread."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The table's name or location, for messages."""

    @property
    @abstractmethod
    def properties(self) -> Mapping[str, str]:
        """Table properties (``stream-sink.max-continuous-empty-commits`` is read here)."""

    @abstractmethod
    def decode(self, raw: bytes) -> BatchFiles:
        """A batch's files from the bytes ``BatchFiles.to_bytes`` produced."""

    @abstractmethod
    def empty(self) -> BatchFiles:
        """The files of a batch that wrote nothing."""

    @abstractmethod
    def stage(
        self, namer: StagingNamer, checkpoint_id: int, batch_id: int, files: BatchFiles
    ) -> bytes:
        """Stage ``files`` durably; the payload for state (empty bytes: nothing staged)."""

    @abstractmethod
    def unstage(self, payload: bytes, *, where: str, committed: bool) -> BatchFiles:
        """The files a payload of :meth:`stage` stands for. ``committed``: the batch is
        known to be committed, so missing staging artifacts read as no files."""

    @abstractmethod
    def release(self, payloads: Iterable[bytes], *, where: str) -> None:
        """Delete the staging artifacts of committed payloads (failures only log)."""

    @abstractmethod
    def sweep(self, namer: StagingNamer, referenced: Iterable[bytes], *, where: str) -> None:
        """Delete staging artifacts of ``namer`` that no payload in ``referenced`` uses."""

    @abstractmethod
    def watermark(self, job_id: str, operator_id: str) -> int:
        """The committed watermark of (job, operator) on the refreshed table; -1 if none."""

    @abstractmethod
    def commit(
        self, group: CommitGroup, job_id: str, operator_id: str, metrics: CommitterMetrics
    ) -> int | None:
        """Commit ``group`` (its batches ascending) as one table version of its shape,
        stamped ``group.stamp``. None when committed; the refusing watermark when (job,
        operator) had already committed at or above ``group.lowest`` (nothing written)."""

    @abstractmethod
    def delete_unreferenced(
        self, files: Sequence[BatchFiles], job_id: str, operator_id: str, from_batch: int
    ) -> list[str]:
        """Delete the paths of ``files`` the table does not reference; returns them."""

    @abstractmethod
    def delete_file(self, path: str) -> None:
        """Delete one file (a replay's file that state does not record)."""

    def identity(self) -> TableIdentity | None:
        """Which table this is (catalog, name, uuid), recorded in the sink's state and
        checkpoints so that they are never used for another table; None: not known."""
        return None

    def source_position(self, operator_id: str) -> SourcePosition | None:
        """The source position the table records for ``operator_id`` (the refreshed
        table); None when it records none or the format keeps none."""
        return None

    def file_exists(self, path: str) -> bool:
        """Whether a file a batch wrote is still there (checked before committing what a
        restored state holds); formats that cannot tell answer True."""
        return True
