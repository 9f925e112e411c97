"""Iceberg's TestFlinkIcebergSinkV2Base scenarios through IcebergSink on Spark.

One Flink checkpoint is one micro-batch: each batch's snapshot must hold exactly the rows
Flink's test expects after that checkpoint (compared as multisets, stricter than Flink's
sets), read by our reader and by DuckDB. All
scenarios run as sinks of ONE streaming query (each scenario's rows go to its own table),
unpartitioned and partitioned by ``data``. A partitioned upsert on a key lacking the
partition column is refused before anything is committed (Flink refuses it too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_connection
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.spark import IcebergSink
from stream_sink.table.catalog import Catalog

Change = tuple[str, int, str]
Rows = list[tuple[int, str]]


@dataclass(frozen=True)
class Scenario:
    name: str
    key: tuple[str, ...]
    upsert: bool
    batches: tuple[tuple[Change, ...], ...]
    expected: tuple[tuple[tuple[int, str], ...], ...]


def scenario(
    name: str, key: Sequence[str], upsert: bool, batches: list, expected: list
) -> Scenario:
    return Scenario(
        name,
        tuple(key),
        upsert,
        tuple(tuple(b) for b in batches),
        tuple(tuple(sorted(e)) for e in expected),
    )


SCENARIOS = [
    scenario(
        "changelog_id",
        ["id"],
        False,
        [
            [
                ("+I", 1, "aaa"),
                ("-D", 1, "aaa"),
                ("+I", 1, "bbb"),
                ("+I", 2, "aaa"),
                ("-D", 2, "aaa"),
                ("+I", 2, "bbb"),
            ],
            [("-U", 2, "bbb"), ("+U", 2, "ccc"), ("-D", 2, "ccc"), ("+I", 2, "ddd")],
            [("-D", 1, "bbb"), ("+I", 1, "ccc"), ("-D", 1, "ccc"), ("+I", 1, "ddd")],
        ],
        [
            [(1, "bbb"), (2, "bbb")],
            [(1, "bbb"), (2, "ddd")],
            [(1, "ddd"), (2, "ddd")],
        ],
    ),
    scenario(
        "changelog_data",
        ["data"],
        False,
        [
            [
                ("+I", 1, "aaa"),
                ("-D", 1, "aaa"),
                ("+I", 2, "bbb"),
                ("+I", 1, "bbb"),
                ("+I", 2, "aaa"),
            ],
            [("-U", 2, "aaa"), ("+U", 1, "ccc"), ("+I", 1, "aaa")],
            [("-D", 1, "bbb"), ("+I", 2, "aaa"), ("+I", 2, "ccc")],
        ],
        [
            [(1, "bbb"), (2, "aaa")],
            [(1, "aaa"), (1, "bbb"), (1, "ccc")],
            [(1, "aaa"), (1, "ccc"), (2, "aaa"), (2, "ccc")],
        ],
    ),
    scenario(
        "changelog_id_data",
        ["data", "id"],
        False,
        [
            [
                ("+I", 1, "aaa"),
                ("-D", 1, "aaa"),
                ("+I", 2, "bbb"),
                ("+I", 1, "bbb"),
                ("+I", 2, "aaa"),
            ],
            [("-U", 2, "aaa"), ("+U", 1, "ccc"), ("+I", 1, "aaa")],
            [("-D", 1, "bbb"), ("+I", 2, "aaa")],
        ],
        [
            [(1, "bbb"), (2, "aaa"), (2, "bbb")],
            [(1, "aaa"), (1, "bbb"), (1, "ccc"), (2, "bbb")],
            [(1, "aaa"), (1, "ccc"), (2, "aaa"), (2, "bbb")],
        ],
    ),
    scenario(
        "changelog_same_key",
        ["id", "data"],
        False,
        [
            [("+I", 1, "aaa"), ("-D", 1, "aaa"), ("+I", 1, "aaa")],
            [("-U", 1, "aaa"), ("+U", 1, "aaa")],
            [("-D", 1, "aaa"), ("+I", 1, "aaa")],
            [("-U", 1, "aaa"), ("+U", 1, "aaa"), ("+I", 1, "aaa")],
        ],
        [
            [(1, "aaa")],
            [(1, "aaa")],
            [(1, "aaa")],
            # Flink lists (1, aaa) twice but compares sets; its writer, like ours, keeps ONE
            # row: the +I position-deletes the +U of the same key written in that checkpoint.
            [(1, "aaa")],
        ],
    ),
    scenario(
        "upsert_id",
        ["id"],
        True,
        [
            [("+I", 1, "aaa"), ("+U", 1, "bbb")],
            [("+I", 1, "ccc")],
            [("+U", 1, "ddd"), ("+I", 1, "eee")],
        ],
        [
            [(1, "bbb")],
            [(1, "ccc")],
            [(1, "eee")],
        ],
    ),
    scenario(
        "upsert_data",
        ["data"],
        True,
        [
            [("+I", 1, "aaa"), ("+I", 2, "aaa"), ("+I", 3, "bbb")],
            [("+U", 4, "aaa"), ("-U", 3, "bbb"), ("+U", 5, "bbb")],
            [("+I", 6, "aaa"), ("+U", 7, "bbb")],
        ],
        [
            [(2, "aaa"), (3, "bbb")],
            [(4, "aaa"), (5, "bbb")],
            [(6, "aaa"), (7, "bbb")],
        ],
    ),
    scenario(
        "upsert_id_data",
        ["id", "data"],
        True,
        [
            [("+I", 1, "aaa"), ("+U", 1, "aaa"), ("+I", 2, "bbb")],
            [("+I", 1, "aaa"), ("-D", 2, "bbb"), ("+I", 2, "ccc")],
            [("+U", 1, "bbb"), ("-U", 1, "ccc"), ("-D", 1, "aaa")],
        ],
        [
            [(1, "aaa"), (2, "bbb")],
            [(1, "aaa"), (2, "ccc")],
            [(1, "bbb"), (2, "ccc")],
        ],
    ),
]

TABLE_SCHEMA = pa.schema(
    [pa.field("id", pa.int32(), nullable=False), pa.field("data", pa.string(), nullable=False)]
)
INPUT_SCHEMA = "scenario string, kind string, id int, data string, seq long"


def refused(s: Scenario, partitioned: bool) -> bool:
    """Flink's rule: a partitioned upsert table needs the partition column in the key."""
    return partitioned and s.upsert and "data" not in s.key


CASES = [
    (s, p)
    for s in SCENARIOS
    for p in (False, True)
    if not refused(s, p) and not (s.name == "changelog_same_key" and p)
]


def table_name(s: Scenario, partitioned: bool) -> str:
    return f"db.{s.name}_{'part' if partitioned else 'unpart'}"


def input_batches() -> list[list[dict[str, Any]]]:
    n = max(len(s.batches) for s in SCENARIOS)
    out: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    seq = 0
    for s, p in CASES:
        for i, changes in enumerate(s.batches):
            for kind, id_, data in changes:
                seq += 1
                out[i].append(
                    {
                        "scenario": table_name(s, p),
                        "kind": kind,
                        "id": id_,
                        "data": data,
                        "seq": seq,
                    }
                )
    return out


def make_sink(
    catalog: Catalog, root: Path, s: Scenario, partitioned: bool, spark_checkpoint: str
) -> IcebergSink:
    name = table_name(s, partitioned)
    catalog.create_table(
        name, schema=TABLE_SCHEMA, partition_spec=[("identity", "data")] if partitioned else None
    )
    return IcebergSink(
        catalog=catalog,
        table=name,
        mode="upsert" if s.upsert else "changelog",
        equality_fields=list(s.key),
        row_kind_column="kind",
        order_by="seq",
        checkpoint_location=str(root / "chk" / name),
        state_dir=str(root / "state"),
        spark_checkpoint_location=spark_checkpoint,
    )


@pytest.fixture(scope="module")
def scenario_tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("flink")
    catalog = ss.load_catalog("flink", type="hadoop", warehouse=str(root / "warehouse"))
    catalog.create_namespace("db")
    spark_checkpoint = str(root / "spark-checkpoint")
    sinks = {table_name(s, p): make_sink(catalog, root, s, p, spark_checkpoint) for s, p in CASES}
    write_batches(root / "in", input_batches())

    def fan_out(df: Any, batch_id: int) -> None:
        df.persist()
        try:
            for name, sink in sinks.items():
                sink.foreach_batch(df.where(F.col("scenario") == name).drop("scenario"), batch_id)
        finally:
            df.unpersist()

    try:
        run_available(spark, root / "in", INPUT_SCHEMA, fan_out, spark_checkpoint)
    finally:
        for sink in sinks.values():
            sink.close()
    return catalog


def snapshot_rows(catalog: Catalog, name: str) -> tuple[list[Rows], list[Rows]]:
    """Per snapshot (oldest first): rows by our reader, rows by DuckDB."""
    table = catalog.load_table(name)
    ours, duck = [], []
    con = duckdb_connection()
    try:
        for snap in table.snapshots():
            got = table.scan(snapshot_id=snap.snapshot_id).to_arrow()
            ours.append(
                sorted(
                    zip(got.column("id").to_pylist(), got.column("data").to_pylist(), strict=True)
                )
            )
            sql = "SELECT id, data FROM iceberg_scan(?, snapshot_from_id => ?) ORDER BY id, data"
            duck.append(
                [
                    tuple(r)
                    for r in con.execute(
                        sql, [table.metadata_location, snap.snapshot_id]
                    ).fetchall()
                ]
            )
    finally:
        con.close()
    return ours, duck


@pytest.mark.parametrize(("s", "partitioned"), CASES, ids=[table_name(s, p)[3:] for s, p in CASES])
def test_each_batch_snapshot_equals_flinks_expected_rows(
    scenario_tables: Catalog, s: Scenario, partitioned: bool
) -> None:
    ours, duck = snapshot_rows(scenario_tables, table_name(s, partitioned))
    expected = [list(e) for e in s.expected]
    assert ours == expected
    assert duck == expected


def test_partitioned_upsert_on_a_key_without_the_partition_column_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    catalog = ss.load_catalog("refuse", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    upsert_id = next(s for s in SCENARIOS if s.name == "upsert_id")
    spark_checkpoint = str(tmp_path / "spark-checkpoint")
    sink = make_sink(catalog, tmp_path, upsert_id, True, spark_checkpoint)
    rows = [
        {"kind": k, "id": i, "data": d, "seq": n}
        for n, (k, i, d) in enumerate(upsert_id.batches[0])
    ]
    write_batches(tmp_path / "in", [rows])
    with pytest.raises(StreamingQueryException, match=r"InvalidOptionError.*\['data'\]"):
        try:
            run_available(
                spark,
                tmp_path / "in",
                "kind string, id int, data string, seq long",
                sink.foreach_batch,
                spark_checkpoint,
            )
        finally:
            sink.close()
    table = catalog.load_table(table_name(upsert_id, True))
    assert table.snapshots() == []
    assert not list((tmp_path / "warehouse").rglob("*.parquet"))


@pytest.mark.interop
def test_final_tables_read_the_same_by_java_iceberg(scenario_tables: Catalog) -> None:
    from interop.conftest import java_available, read_with_java

    if not java_available():
        pytest.skip("the java-iceberg launcher is not available")
    names = [table_name(s, p) for s, p in CASES]
    java = read_with_java([scenario_tables.load_table(n).metadata_location for n in names])
    for (s, _p), name, got in zip(CASES, names, java, strict=True):
        rows = (
            sorted(zip(got.column("id").to_pylist(), got.column("data").to_pylist(), strict=True))
            if got.num_rows
            else []
        )
        assert rows == list(s.expected[-1]), name
