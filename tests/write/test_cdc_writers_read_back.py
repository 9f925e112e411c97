"""Random CDC streams written by the CDC writers, one row delta per task, read back by
DuckDB and by Apache Iceberg Java; both must equal a plain dict model of the table."""

from __future__ import annotations

import datetime as dt
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from peers.readers import JAVA_ICEBERG, read_with_java
from readers import duckdb_connection

from stream_sink.catalogs import load_catalog
from stream_sink.table.manifest import DataFileContent
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us"), nullable=False),
        pa.field("data", pa.string()),
    ]
)
DAY0 = dt.datetime(2024, 5, 1)
Row = tuple[int, dt.datetime, str]


@dataclass(frozen=True)
class Shape:
    name: str
    spec: list[tuple[Any, ...]]
    keys: list[str]
    upsert: bool


SHAPES = [
    Shape("changelog_unpartitioned", [], ["id"], False),
    Shape("changelog_identity", [("identity", "data")], ["id"], False),
    Shape("upsert_bucket_day", [("bucket", "id", 4), ("day", "ts")], ["id", "ts"], True),
    Shape("upsert_unpartitioned", [], ["id"], True),
]


def cdc_task(
    rng: random.Random,
    live: dict[tuple[Any, ...], Row],
    shape: Shape,
    rows: int,
    next_id: list[int],
) -> list[tuple[str, Row]]:
    """Valid changes for one task; ``live`` (key → row) is updated to the state after it."""
    out: list[tuple[str, Row]] = []

    def key(row: Row) -> tuple[Any, ...]:
        return (row[0],) if shape.keys == ["id"] else (row[0], row[1])

    for _ in range(rows):
        choice = rng.random()
        if not live or choice < 0.5:
            row = (next_id[0], DAY0 + dt.timedelta(days=rng.randrange(3)), rng.choice("abc"))
            next_id[0] += 1
            out.append(("+I", row))
            live[key(row)] = row
        elif choice < 0.85:
            old = live[rng.choice(sorted(live))]
            new = (old[0], old[1], rng.choice("abcd") + str(rng.randrange(9)))
            out += [("-U", old), ("+U", new)]
            live[key(new)] = new
        else:
            old = live.pop(rng.choice(sorted(live)))
            out.append(("-D", old))
    return out


def to_batch(changes: list[tuple[str, Row]]) -> pa.Table:
    kinds = pa.array([k for k, _ in changes], pa.string())
    columns = [pa.array([r[i] for _, r in changes], f.type) for i, f in enumerate(SCHEMA)]
    return pa.Table.from_arrays([kinds, *columns], names=["_row_kind", *SCHEMA.names])


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[Row], set]]:
    """name → (metadata location, expected rows, delete file kinds written)."""
    root = tmp_path_factory.mktemp("delta_tables")
    catalog = load_catalog("delta", type="hadoop", warehouse=str(root / "warehouse"))
    catalog.create_namespace("db")
    out = {}
    for seed, shape in enumerate(SHAPES):
        table = catalog.create_table(
            f"db.{shape.name}",
            schema=SCHEMA,
            partition_spec=shape.spec,
            identifier_fields=shape.keys,
        )
        factory = TaskWriterFactory.for_table(
            table, equality_fields=shape.keys, upsert=shape.upsert
        )
        rng, live, next_id, kinds = random.Random(seed), {}, [0], set()
        for task in range(4):
            writer = factory.create(0, task)
            for _ in range(3):
                writer.write(to_batch(cdc_task(rng, live, shape, 40, next_id)))
            result = writer.complete()
            kinds |= {f.content for f in result.delete_files}
            commit_write_result(table, result)
        out[shape.name] = (table.metadata_location, sorted(live.values()), kinds)
    return out


def test_duckdb_reads_the_model(tables: dict[str, tuple[str, list[Row], set]]) -> None:
    con = duckdb_connection()
    for name, (location, expected, kinds) in tables.items():
        # every shape exercised both kinds of deletes
        assert kinds == {DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES}, name
        got = con.execute(f"SELECT id, ts, data FROM iceberg_scan('{location}')").fetchall()
        assert sorted(got) == expected, name


@pytest.mark.interop
@pytest.mark.skipif(
    not JAVA_ICEBERG.exists() or shutil.which("bash") is None,
    reason="java-iceberg launcher not present",
)
def test_java_reads_the_model(
    tables: dict[str, tuple[str, list[Row], set]], tmp_path: Path
) -> None:
    names = list(tables)
    java = read_with_java([tables[n][0] for n in names])
    for name, table in zip(names, java, strict=True):
        rows = table.select(["id", "ts", "data"]).to_pylist()
        got = sorted((r["id"], _naive(r["ts"]), r["data"]) for r in rows)
        assert got == tables[name][1], name


def _naive(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value
