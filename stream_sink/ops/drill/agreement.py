"""Whether the tables of a job that writes several agree: every checkpoint is in all of
them or in none.

A table's checkpoint is the sink's stamp on its current snapshot
(``stream-sink.max-committed-checkpoint-id``: the last batch the table holds), None
before its first commit. The drill reads the stamps after a kill of a scenario's first
run and after its last run; a routed sink on a catalog that commits atomically moves
every table's pointer in one transaction, so the stamps are then all equal. (A restart
first commits what a kill left staged, table by table, before its first batch: a kill
in a later run may catch that, so those kills are not checked.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stream_sink.commit.iceberg.watermark import MAX_COMMITTED_CHECKPOINT_ID
from stream_sink.ops.drill.jobs import JobSpec, open_scenario_catalog, scenario_table

Stamps = Mapping[str, "int | None"]


def disagreement(stamps: Stamps) -> str | None:
    """Why the tables' stamps disagree (each table's stamp named), None when they agree
    (all equal, or fewer than two tables)."""
    if len(set(stamps.values())) <= 1:
        return None
    shown = ", ".join(f"{name} {_shown(stamp)}" for name, stamp in sorted(stamps.items()))
    return f"the tables hold different checkpoints ({shown}): some checkpoint is in some only"


def _shown(stamp: int | None) -> str:
    return "without a commit" if stamp is None else f"up to batch {stamp}"


def table_stamps(catalog: Any, tables: Sequence[str]) -> dict[str, int | None]:
    """Each table's stamp (module docstring)."""
    out: dict[str, int | None] = {}
    for name in tables:
        snapshot = catalog.load_table(name).current_snapshot()
        stamp = snapshot.summary.get(MAX_COMMITTED_CHECKPOINT_ID) if snapshot else None
        out[name] = None if stamp is None else int(stamp)
    return out


def check_agreement(job: JobSpec, context: dict[str, Any], when: str) -> str | None:
    """Why the scenario's tables disagree ``when`` (e.g. "after the kill in run 1"); None
    when they agree or the job writes one table."""
    if len(job.tables) < 2:
        return None
    catalog = open_scenario_catalog(job, context, "drill-agreement")
    try:
        names = [scenario_table(t, context) for t in job.tables]
        problem = disagreement(table_stamps(catalog, names))
    finally:
        catalog.close()
    return None if problem is None else f"{when}: {problem}"
