"""Which tables each batch of a routed sink (one stream into many tables) wrote.

Spark's commit log acknowledges a batch as a whole; a routed batch touches some tables
and not others. To tell, on restore, whether a table's operator state lost a batch that
upstream acknowledged, the sink records before acknowledging each batch the tables that
received rows in it. A table's acknowledged batches are then the acknowledged batches
whose record names it (see ``stream_sink.commit.loss_check``).

Invariants:
- A batch is recorded (one atomic, durable file write) before any table's committer
  processes it, so every batch upstream acknowledged is recorded unless its record was
  dropped as committed.
- A record is dropped only once every table it names has committed that batch (its
  watermark for the job is at or above it): the table itself then accounts for it.
- The log belongs to one Spark query (job id); a new query starts an empty log.
- Without a log (an older sink, or one deleted by hand) no table is checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from stream_sink.exceptions import CorruptMetadataError
from stream_sink.io.fileio import FileIO


class RouteLog:
    """The tables of each recorded batch of one routed sink, at ``location`` (JSON)."""

    def __init__(self, io: FileIO, location: str, job_id: str) -> None:
        self._io = io
        self._location = location
        self._job_id = job_id
        self._batches: dict[int, tuple[str, ...]] = self._load()

    def _load(self) -> dict[int, tuple[str, ...]]:
        if not self._io.exists(self._location):
            return {}
        try:
            raw = json.loads(self._io.read_bytes(self._location))
            if raw.get("job") != self._job_id:
                return {}
            return {int(b): tuple(map(str, ts)) for b, ts in raw["batches"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptMetadataError(
                f"routed sink log {self._location} is unreadable ({e}); delete it to start "
                "without loss detection for the tables it served"
            ) from e

    @property
    def batches(self) -> Mapping[int, tuple[str, ...]]:
        return dict(self._batches)

    def record(self, batch_id: int, tables: Iterable[str]) -> None:
        """Durably note that ``batch_id`` wrote ``tables`` (a replay overwrites it)."""
        self._batches[batch_id] = tuple(sorted(tables))
        self._save()

    def acknowledged_for(self, table: str, acknowledged: Sequence[int]) -> list[int]:
        """The acknowledged batches whose record names ``table``."""
        return [b for b in acknowledged if table in self._batches.get(b, ())]

    def drop_committed(self, watermarks: Mapping[str, int]) -> None:
        """Forget batches every table of which has committed them (``watermarks``: each
        table's highest committed batch of this job)."""
        keep = {
            b: ts for b, ts in self._batches.items() if any(watermarks.get(t, -1) < b for t in ts)
        }
        if len(keep) != len(self._batches):
            self._batches = keep
            self._save()

    def _save(self) -> None:
        batches = {str(b): list(ts) for b, ts in self._batches.items()}
        body = {"job": self._job_id, "batches": batches}
        self._io.write_atomic(self._location, json.dumps(body, sort_keys=True).encode())
