"""Snapshot summaries with Iceberg's standard counters and running totals.

Invariants:
- ``added-*`` / ``removed-*`` / ``deleted-*`` describe only this snapshot's change.
- ``total-*`` = the parent's total + added - removed; when the parent lacks a
  total (a writer that does not keep them), that total is left out, as Java does.
- Caller properties never override the computed counters or ``operation``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from stream_sink.table.manifest import DataFile, DataFileContent

_TOTALS = {
    "total-records": ("added-records", "deleted-records"),
    "total-files-size": ("added-files-size", "removed-files-size"),
    "total-data-files": ("added-data-files", "deleted-data-files"),
    "total-delete-files": ("added-delete-files", "removed-delete-files"),
    "total-position-deletes": ("added-position-deletes", "removed-position-deletes"),
    "total-equality-deletes": ("added-equality-deletes", "removed-equality-deletes"),
}


@dataclass
class SummaryBuilder:
    counts: Counter[str] = field(default_factory=Counter)
    partitions: set[tuple[int, tuple[object, ...]]] = field(default_factory=set)

    def added(self, f: DataFile) -> None:
        self._count(f, "added", "added")

    def removed(self, f: DataFile) -> None:
        self._count(f, "deleted", "removed")

    def _count(self, f: DataFile, data_verb: str, delete_verb: str) -> None:
        self.partitions.add((f.spec_id, tuple(f.partition)))
        size_key = "added-files-size" if data_verb == "added" else "removed-files-size"
        self.counts[size_key] += f.file_size_in_bytes
        if f.content == DataFileContent.DATA:
            self.counts[f"{data_verb}-data-files"] += 1
            self.counts[f"{data_verb}-records"] += f.record_count
            return
        self.counts[f"{delete_verb}-delete-files"] += 1
        if f.content == DataFileContent.POSITION_DELETES:
            self.counts[f"{delete_verb}-position-delete-files"] += 1
            self.counts[f"{delete_verb}-position-deletes"] += f.record_count
        else:
            self.counts[f"{delete_verb}-equality-delete-files"] += 1
            self.counts[f"{delete_verb}-equality-deletes"] += f.record_count

    def build(
        self,
        operation: str,
        parent_summary: Mapping[str, str] | None,
        properties: Mapping[str, str],
    ) -> dict[str, str]:
        out: dict[str, str] = {k: str(v) for k, v in properties.items()}
        for key, value in sorted(self.counts.items()):
            if value:
                out[key] = str(value)
        out["changed-partition-count"] = str(len(self.partitions))
        parent = parent_summary if parent_summary is not None else {}
        for total, (plus, minus) in _TOTALS.items():
            if parent_summary is not None and total not in parent:
                continue
            try:
                previous = int(parent.get(total, "0"))
            except ValueError:
                continue
            out[total] = str(previous + self.counts[plus] - self.counts[minus])
        out["operation"] = operation
        return out
