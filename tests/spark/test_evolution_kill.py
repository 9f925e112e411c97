"""Kill tests for streams that change shape: the job is SIGKILLed right after a schema
change is committed (a column added, before the batch's data) and between two tables'
commits of one routed checkpoint; the stream also widens a type and makes a column
optional; then restarted; Java Iceberg, DuckDB,
pyiceberg and our reader see every row exactly once, old rows null in the new column,
and Java reports the schema history."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kill_harness import KillJob, assert_committed_once, iceberg_marks, write_batches
from many_tables import KEYS, TABLES, events
from readers import duckdb_rows, pyiceberg_rows

import stream_sink as ss

JOB = Path(__file__).with_name("evolve_kill_job.py")
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]  # five JVM starts
EVO_TABLE = pa.schema(
    [
        pa.field("id", pa.int64(), False),
        pa.field("n", pa.int32()),
        pa.field("must", pa.string(), False),
    ]
)


def evo_batches() -> list[list[dict[str, Any]]]:
    out = [[{"id": i, "n": i, "must": f"m{i}"} for i in range(5)]]
    out.append([{"id": i, "n": i, "must": f"m{i}", "note": f"note{i}"} for i in range(5, 10)])
    out.append(
        [
            {"id": i, "n": 2**40 + i, "must": None if i % 2 else "x", "note": None}
            for i in range(10, 15)
        ]
    )
    out.append([{"id": i, "n": -i, "must": "y", "note": "z"} for i in range(15, 20)])
    return out


def expected_evo() -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["n"], r["must"], r.get("note")) for b in evo_batches() for r in b)


def prepare(root: Path) -> dict[str, dict[Any, Any]]:
    catalog = ss.load_catalog("evo", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    catalog.create_table("db.evo", schema=EVO_TABLE, identifier_fields=["id"])
    write_batches(root / "evo-in", evo_batches())
    batches, model = events(files=3, per_file=20)
    write_batches(root / "deb-in", batches)
    return model


def evolve_job(root: Path) -> KillJob:
    """``evolve_kill_job.py`` on ``root`` (it imports ``kill_job`` and ``many_tables``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(JOB.parent), env.get("PYTHONPATH", "")])
    return KillJob(JOB, [str(root)], env=env, timeout=600)


def test_kills_during_schema_changes_and_between_tables(tmp_path: Path) -> None:
    from interop.conftest import java_available, sql_with_java

    model = prepare(tmp_path)
    job = evolve_job(tmp_path)
    # 1st change: 'must' made optional (batch 0) passes; 2nd: 'note' added (batch 1) kills
    job.killed_at("after-schema-change@2")
    # evo batches 1, 2 ('n' widened) and 3 commit, then the first table of routed batch 0
    job.killed_at("after-table-commit@4")
    job.run_to_end()

    catalog = ss.load_catalog("evo", type="hadoop", warehouse=str(tmp_path / "wh"))
    evo = catalog.load_table("db.evo")
    schema = evo.schema()
    assert schema.column_names == ["id", "n", "must", "note"]
    assert str(schema.find_type("n")) == "long" and schema.find_field("must").optional
    assert [s.schema_id for s in evo.metadata.schemas] == [0, 1, 2, 3]  # each change once
    want = expected_evo()
    ours = sorted(tuple(r.values()) for r in evo.scan().to_arrow().to_pylist())
    assert ours == want
    for reader in (duckdb_rows, pyiceberg_rows):
        got = sorted((r["id"], r["n"], r["must"], r["note"]) for r in reader(evo.metadata_location))
        assert got == want
    routed = {name: catalog.load_table(name) for name in TABLES}
    for name, table in routed.items():
        got = {r[KEYS[name]]: r for r in table.scan().to_arrow().to_pylist()}
        assert got == model[name], name
        assert_committed_once(iceberg_marks(table), name)
        duck = {r[KEYS[name]]: r for r in duckdb_rows(table.metadata_location)}
        assert duck == model[name], name

    if not java_available():
        pytest.skip("the java-iceberg launcher is not available")
    names = ["db.evo", *TABLES]
    java = sql_with_java(
        str(tmp_path / "wh"),
        [
            *(f"SELECT * FROM hc.{n}" for n in names),
            "SELECT latest_schema_id AS s FROM hc.db.evo.metadata_log_entries ORDER BY timestamp",
            f"SELECT * FROM hc.db.evo VERSION AS OF {evo.snapshots()[0].snapshot_id}",
        ],
    )
    java_evo = sorted(tuple(r.values()) for r in java[0].to_pylist())
    assert java_evo == want
    for name, got in zip(TABLES, java[1:4], strict=True):
        rows = {r[KEYS[name]]: _plain(r) for r in got.to_pylist()}
        assert rows == model[name], name
    # Java's metadata log: the schema id of the current snapshot at each version
    history = [r["s"] for r in java[4].to_pylist() if r["s"] is not None]
    assert history == sorted(history) and set(history) == {1, 2, 3}
    first = java[5]  # time travel reads the first snapshot with the schema it was written in
    assert first.column_names == ["id", "n", "must"] and first.schema.field("n").type == pa.int32()
    assert sorted(first.column("id").to_pylist()) == list(range(5))


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: float(v) if isinstance(v, Decimal) else v for k, v in row.items()}
