"""A consistent read across Delta tables written by one sink: the version of each whose
commit carries the same batch id in the sink's ``txn`` action (the rule:
:mod:`stream_sink.commit.consistent`).

Only commits still in the ``_delta_log`` are seen (log cleanup removes old ones).
"""

from __future__ import annotations

from collections.abc import Sequence

from stream_sink.delta import DeltaTable, Txn
from stream_sink.exceptions import ValidationError

from ..consistent import ConsistentRead, Stamped, choose
from .target import app_id


def stamped_versions(table: DeltaTable, job_id: str, operator_id: str) -> list[Stamped]:
    """(batch id, version) of every commit in the log whose ``txn`` is (job, operator)'s,
    newest first."""
    app = app_id(job_id, operator_id)
    out: list[Stamped] = []
    for version in sorted(table.log.list_commits(), reverse=True):
        for action in table.log.read_commit(version):
            if isinstance(action, Txn) and action.app_id == app:
                out.append((action.version, version))
                break
    return out


def consistent_versions(
    tables: Sequence[DeltaTable], job_id: str, operator_ids: Sequence[str]
) -> ConsistentRead:
    """For each table (written under the operator id at the same position), the version
    to read so every table shows the same checkpoint of job ``job_id``; tables are
    named by their location."""
    if len(tables) != len(operator_ids):
        raise ValidationError("a consistent read needs one operator id per table")
    pairs = list(zip(tables, operator_ids, strict=True))
    stamps = {t.location: stamped_versions(t, job_id, o) for t, o in pairs}
    return choose(stamps, {t.location: o for t, o in pairs})
