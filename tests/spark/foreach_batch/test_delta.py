"""DeltaSink end to end in the shared Spark session: append, dynamic partition
overwrite, upsert and changelog (copy-on-write MERGE); every table read back by delta-rs
and DuckDB's delta extension at every version.

Tests stream_sink.spark.foreach_batch.delta: DeltaSink.
Tests stream_sink.spark.foreach_batch.copy_on_write: the files holding a batch's keys, on
the driver or the executors.
Tests stream_sink.spark.tasks.delta: the executors' Delta tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from delta_readers import delta_rs_query_rows, delta_rs_rows, duckdb_delta_versions
from streams import persisted_rdds, run_available, write_batches

from stream_sink.delta import DeltaTable
from stream_sink.delta.key_positions import keys_folder
from stream_sink.exceptions import InvalidOptionError
from stream_sink.ops.drill.delete_files import delta_rewrite_versions
from stream_sink.spark import DeltaSink

pytestmark = pytest.mark.spark


CHANGES = [
    [{"id": 1, "v": "a", "k": "+I", "seq": 1}, {"id": 2, "v": "b", "k": "+I", "seq": 2}],
    [
        {"id": 1, "v": "a", "k": "-U", "seq": 3},
        {"id": 1, "v": "a1", "k": "+U", "seq": 4},
        {"id": 2, "v": "b", "k": "-D", "seq": 5},
    ],
    [{"id": 2, "v": "b9", "k": "+I", "seq": 6}, {"id": 1, "v": "a1", "k": "-D", "seq": 7}],
]
"""A changelog of updates, a delete and a key deleted and inserted again: (2, "b9") is left."""


def rows_of(rows: list[dict], *cols: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in rows)


def run(
    spark: Any, tmp_path: Path, name: str, batches: list[list[dict]], schema: str, **options: Any
) -> str:
    src = tmp_path / f"{name}-in"
    write_batches(src, batches)
    sink = DeltaSink(
        path=str(tmp_path / name),
        checkpoint_location=str(tmp_path / f"chk-{name}"),
        state_dir=str(tmp_path / "state"),
        **options,
    )
    try:
        run_available(spark, src, schema, sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    return str(tmp_path / name)


def every_version_agrees(loc: str, cols: tuple[str, ...]) -> None:
    table = DeltaTable.load(loc)
    versions = list(range(table.version + 1))
    for v, duck in zip(versions, duckdb_delta_versions(loc, versions), strict=True):
        ours = table.to_arrow(version=v).to_pylist()
        assert rows_of(duck, *cols) == rows_of(ours, *cols), f"version {v}"
        assert rows_of(delta_rs_rows(loc, v), *cols) == rows_of(ours, *cols), f"version {v}"


def test_delta_append_and_partition_overwrite(spark: Any, tmp_path: Path) -> None:
    batches = [[{"id": b * 10 + i, "p": f"p{i % 2}"} for i in range(4)] for b in range(3)]
    loc = run(spark, tmp_path, "append", batches, "id long, p string", partition_by=["p"])
    assert rows_of(delta_rs_rows(loc), "id") == sorted((r["id"],) for b in batches for r in b)
    table = DeltaTable.load(loc)
    assert table.partition_columns == ("p",) and table.version == 3
    assert table.snapshot.txns and max(t.version for t in table.snapshot.txns.values()) == 2
    every_version_agrees(loc, ("id", "p"))

    over = [[{"id": 1, "p": "a"}, {"id": 2, "p": "b"}], [{"id": 3, "p": "a"}]]
    loc = run(
        spark, tmp_path, "over", over, "id long, p string", mode="overwrite", partition_by=["p"]
    )
    assert rows_of(delta_rs_rows(loc), "id", "p") == [(2, "b"), (3, "a")]
    every_version_agrees(loc, ("id", "p"))


def test_delta_table_created_from_a_batch_with_timestamps(spark: Any, tmp_path: Path) -> None:
    """A new table's schema comes from the first batch: Spark's timestamp becomes Delta's
    (UTC-adjusted) timestamp, read back as the same instants by delta-rs and DuckDB."""
    batches = [[{"id": 1, "ts": "2026-03-01T10:00:00Z"}], [{"id": 2, "ts": "2026-03-02T11:30:00Z"}]]
    loc = run(spark, tmp_path, "ts", batches, "id long, ts timestamp")
    table = DeltaTable.load(loc)
    assert [f.type.tz for f in table.to_arrow().schema if f.name == "ts"] == ["UTC"]
    got = [(r["id"], r["ts"].isoformat()) for r in delta_rs_rows(loc)]
    assert sorted(got) == [(1, "2026-03-01T10:00:00+00:00"), (2, "2026-03-02T11:30:00+00:00")]
    every_version_agrees(loc, ("id", "ts"))


def test_delta_upsert_and_changelog_merge_copy_on_write(spark: Any, tmp_path: Path) -> None:
    upserts = [
        [
            {"id": 1, "v": "a", "seq": 1},
            {"id": 2, "v": "b", "seq": 2},
            {"id": 1, "v": "a2", "seq": 3},
        ],
        [{"id": 2, "v": "b2", "seq": 4}, {"id": 3, "v": "c", "seq": 5}],
        [{"id": 3, "v": "c2", "seq": 7}, {"id": 3, "v": "c1", "seq": 6}],
    ]
    loc = run(
        spark,
        tmp_path,
        "upsert",
        upserts,
        "id long, v string, seq long",
        mode="upsert",
        equality_fields=["id"],
        order_by="seq",
    )
    assert rows_of(delta_rs_rows(loc), "id", "v") == [(1, "a2"), (2, "b2"), (3, "c2")]
    every_version_agrees(loc, ("id", "v"))
    # the second batch rewrote the file holding key 2 and left key 1's rows alone
    table = DeltaTable.load(loc)
    assert len(table.snapshot.tombstones) >= 1

    changes = CHANGES
    loc = run(
        spark,
        tmp_path,
        "changelog",
        changes,
        "id long, v string, k string, seq long",
        mode="changelog",
        equality_fields=["id"],
        row_kind_column="k",
        order_by="seq",
    )
    assert rows_of(delta_rs_rows(loc), "id", "v") == [(2, "b9")]
    assert "k" not in DeltaTable.load(loc).schema.names
    every_version_agrees(loc, ("id", "v"))


def test_delta_positions_upsert_and_changelog_commit_deletion_vectors_only(
    spark: Any, tmp_path: Path
) -> None:
    """deletes="positions": the sink creates the table with deletion vectors, no version
    rewrites a data file (each removed file is re-added under a vector), and every
    version reads the same for us, delta-rs and DuckDB; the keys files are gone."""
    upserts = [
        [{"id": i, "v": f"a{i}", "p": f"p{i % 2}", "seq": i} for i in range(6)],
        [{"id": 1, "v": "b1", "p": "p1", "seq": 10}, {"id": 2, "v": "b2", "p": "p1", "seq": 11}],
        [{"id": 2, "v": "c2", "p": "p0", "seq": 13}, {"id": 2, "v": "c1", "p": "p1", "seq": 12}],
    ]
    options: dict[str, Any] = {"mode": "upsert", "equality_fields": ["id"], "order_by": "seq"}
    loc = run(
        spark,
        tmp_path,
        "pos",
        upserts,
        "id long, v string, p string, seq long",
        deletes="positions",
        partition_by=["p"],
        **options,
    )
    want = [(0, "a0"), (1, "b1"), (2, "c2"), (3, "a3"), (4, "a4"), (5, "a5")]
    assert rows_of(delta_rs_query_rows(loc), "id", "v") == want
    positions_versions_agree(loc, ("id", "v", "p"))
    assert DeltaTable.load(loc).snapshot.configuration["delta.enableDeletionVectors"] == "true"

    changes = CHANGES
    loc = run(
        spark,
        tmp_path,
        "poscl",
        changes,
        "id long, v string, k string, seq long",
        mode="changelog",
        equality_fields=["id"],
        row_kind_column="k",
        order_by="seq",
        deletes="positions",
    )
    assert rows_of(delta_rs_query_rows(loc), "id", "v") == [(2, "b9")]
    positions_versions_agree(loc, ("id", "v"))

    plain = DeltaTable.create(str(tmp_path / "plain"), DeltaTable.load(loc).schema)
    with pytest.raises(Exception, match="does not take; enable them"):
        run(
            spark,
            tmp_path,
            "plain",
            changes[:1],
            "id long, v string, k string, seq long",
            mode="changelog",
            equality_fields=["id"],
            row_kind_column="k",
            order_by="seq",
            deletes="positions",
        )
    assert DeltaTable.load(plain.location).version == 0  # nothing written


def positions_versions_agree(loc: str, cols: tuple[str, ...]) -> None:
    table = DeltaTable.load(loc)
    versions = list(range(table.version + 1))
    for v, duck in zip(versions, duckdb_delta_versions(loc, versions), strict=True):
        ours = rows_of(table.to_arrow(version=v).to_pylist(), *cols)
        assert rows_of(duck, *cols) == ours, f"version {v}"
        assert rows_of(delta_rs_query_rows(loc, v), *cols) == ours, f"version {v}"
    assert delta_rewrite_versions(loc) == []
    folder = Path(keys_folder(loc, "any")).parent  # every sink's keys folder
    assert not [f for f in folder.rglob("*") if f.is_file()]  # every keys file released


def test_delta_upsert_reads_each_batch_from_its_source_once(spark: Any, tmp_path: Path) -> None:
    """A MERGE runs two Spark jobs per batch (its keys' files rewritten, its changes
    written), yet each batch is read from the source once: Spark's progress counts each
    batch's rows once (``numInputRows``), and nothing the sink persisted for it stays
    behind. The table holds each key's last change, ``-U`` rows ignored, as delta-rs and
    DuckDB read it."""
    batches = [
        [{"id": i, "v": f"a{i}", "k": "+I", "seq": i} for i in range(1, 6)],
        [
            {"id": 2, "v": "a2", "k": "-U", "seq": 6},
            {"id": 2, "v": "b2", "k": "+U", "seq": 7},
            {"id": 3, "v": "a3", "k": "-D", "seq": 8},
            {"id": 6, "v": "b6", "k": "+I", "seq": 9},
        ],
        [{"id": 1, "v": "c1", "k": "+U", "seq": 10}, {"id": 6, "v": "b6", "k": "-U", "seq": 11}],
    ]
    write_batches(tmp_path / "in", batches)
    loc = str(tmp_path / "once")
    sink = DeltaSink(
        path=loc, mode="upsert", equality_fields=["id"], row_kind_column="k", order_by="seq",
        checkpoint_location=str(tmp_path / "chk"), state_dir=str(tmp_path / "state"),
    )  # fmt: skip
    persisted = persisted_rdds(spark)
    try:
        query = run_available(
            spark,
            tmp_path / "in",
            "id long, v string, k string, seq long",
            sink.foreach_batch,
            sink.spark_checkpoint_location,
        )
    finally:
        sink.close()
    read = {p["batchId"]: p["numInputRows"] for p in query.recentProgress if p["numInputRows"]}
    assert read == {b: len(rows) for b, rows in enumerate(batches)}  # twice that if read twice
    assert persisted_rdds(spark) == persisted
    expected = [(1, "c1"), (2, "b2"), (4, "a4"), (5, "a5"), (6, "b6")]
    assert rows_of(delta_rs_rows(loc), "id", "v") == expected
    assert rows_of(duckdb_delta_versions(loc, [None])[0], "id", "v") == expected


@pytest.mark.parametrize("partition_by", [None, ["p"]])
def test_delta_upsert_beyond_the_driver_key_limit_keeps_its_keys_on_the_executors(
    spark: Any, tmp_path: Path, partition_by: list[str] | None
) -> None:
    """``driver_key_limit=1``: every batch of two or more keys finds the files to rewrite
    with joins on the executors. Exactly the files holding a touched key are replaced: the
    second batch's file lies within the keys' range [1, 5] but holds neither key."""
    upserts = [
        [{"id": 1, "p": "a", "v": "x", "seq": 1}, {"id": 2, "p": "a", "v": "y", "seq": 2}],
        [{"id": 4, "p": "a", "v": "z", "seq": 3}, {"id": 6, "p": "a", "v": "w", "seq": 4}],
        [{"id": 1, "p": "a", "v": "x2", "seq": 5}, {"id": 5, "p": "a", "v": "n", "seq": 6}],
    ]
    loc = run(
        spark,
        tmp_path,
        "spill",
        upserts,
        "id long, p string, v string, seq long",
        mode="upsert",
        equality_fields=["id", "p"],
        order_by="seq",
        partition_by=partition_by,
        driver_key_limit=1,
    )
    expected = [(1, "x2"), (2, "y"), (4, "z"), (5, "n"), (6, "w")]
    assert rows_of(delta_rs_rows(loc), "id", "v") == expected
    table = DeltaTable.load(loc)
    second = set(table.snapshot_at(2).files) - set(table.snapshot_at(1).files)
    assert second and second <= set(table.snapshot.files)  # left alone
    assert len(table.snapshot.tombstones) == 1  # the first batch's file, rewritten
    every_version_agrees(loc, ("id", "v"))


def test_delta_sink_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="needs equality_fields"):
        DeltaSink(path=str(tmp_path / "t"), mode="upsert", order_by="seq")
    with pytest.raises(InvalidOptionError, match="needs order_by"):
        DeltaSink(path=str(tmp_path / "t"), mode="upsert", equality_fields=["id"])
    with pytest.raises(InvalidOptionError, match="row_kind_column"):
        DeltaSink(
            path=str(tmp_path / "t"), mode="changelog", equality_fields=["id"], order_by="seq"
        )
    with pytest.raises(InvalidOptionError, match="applies to mode 'upsert' or 'changelog'"):
        DeltaSink(path=str(tmp_path / "t"), deletes="positions")
    with pytest.raises(InvalidOptionError, match="not one of copy-on-write, positions"):
        DeltaSink(path=str(tmp_path / "t"), deletes="equality")
    with pytest.raises(InvalidOptionError, match="put-if-absent"):  # before any batch
        DeltaSink(path="gs://bucket/t")
    with pytest.raises(InvalidOptionError, match=r"s3\.endpoint"):
        DeltaSink(path="s3://bucket/t", storage_options={"endpoint": "http://x"})


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.timeout(1800)  # a stream, then a JVM for Delta Lake
def test_delta_sink_maintenance_compacts_and_vacuums_between_commits(
    spark: Any, tmp_path: Path
) -> None:
    """In-sink maintenance every 3 versions: small files compacted (``OPTIMIZE``,
    ``dataChange=false``) and files removed past the retention deleted; the table as
    delta-rs, DuckDB and Delta Lake on Spark read it is the stream's last change per key."""
    from peers.readers import read_with_delta

    from stream_sink.delta import DeltaMaintenanceOptions
    from stream_sink.delta.vacuum import vacuum

    batches = [
        [{"id": (b * 7 + i) % 10, "p": f"p{i % 2}", "seq": b * 100 + i} for i in range(6)]
        for b in range(10)
    ]
    last = {r["id"]: r["seq"] for batch in batches for r in batch}
    maintenance = DeltaMaintenanceOptions(every_versions=3, min_input_files=2)
    src = tmp_path / "m-in"
    write_batches(src, batches)
    sink = DeltaSink(
        path=str(tmp_path / "m"),
        checkpoint_location=str(tmp_path / "chk-m"),
        state_dir=str(tmp_path / "state"),
        mode="upsert",
        partition_by=["p"],
        equality_fields=["id"],
        order_by="seq",
        configuration={"delta.deletedFileRetentionDuration": "interval 0 seconds"},
        maintenance=maintenance,
    )
    try:
        run_available(
            spark,
            src,
            "id long, p string, seq long",
            sink.foreach_batch,
            sink.spark_checkpoint_location,
        )
    finally:
        sink.close()
    m = sink.maintenance_metrics
    assert m.runs >= 3 and m.failures == 0 and m.compacted_files > 0 and m.vacuumed_files > 0
    loc = str(tmp_path / "m")
    table = DeltaTable.load(loc)
    want = sorted(last.items())
    vacuum(table)  # what the last versions removed after the last run
    on_disk = [p for p in Path(loc).rglob("*.parquet") if "_delta_log" not in p.parts]
    assert len(on_disk) == len(table.snapshot.files)  # vacuumed: only live files remain
    (delta_lake,) = read_with_delta([loc])
    for rows in (delta_rs_rows(loc), duckdb_delta_versions(loc, [None])[0], delta_lake.to_pylist()):
        assert sorted((r["id"], r["seq"]) for r in rows) == want


def test_table_show_lists_each_sink_writing_a_delta_table(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two sinks append to one table; ``stream-sink table show`` lists both with their
    watermarks (the last batch each committed), as it does for an Iceberg table."""
    from stream_sink.cli.main import main

    loc = str(tmp_path / "orders")
    for sink_id, batches in (("orders-web", 3), ("orders-app", 2)):
        src = tmp_path / f"{sink_id}-in"
        write_batches(src, [[{"id": b, "p": sink_id}] for b in range(batches)])
        sink = DeltaSink(
            path=loc,
            sink_id=sink_id,
            checkpoint_location=str(tmp_path / f"chk-{sink_id}"),
            state_dir=str(tmp_path / "state"),
        )
        try:
            run_available(
                spark, src, "id long, p string", sink.foreach_batch, sink.spark_checkpoint_location
            )
        finally:
            sink.close()

    assert main(["table", "show", loc]) == 0
    out = capsys.readouterr().out
    assert "sinks (watermark: the highest Spark batch id each sink committed):" in out
    sinks, positions = out.split("source positions", 1)
    lines = {line.split()[0]: line.split() for line in sinks.splitlines() if "orders-" in line}
    assert lines["orders-app"][2] == "1" and lines["orders-web"][2] == "2"
    assert "orders-app" in positions and "orders-web" in positions
    assert main(["table", "show", loc, "--format", "jsonl"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {(s["sink"], s["watermark"]) for s in shown["sinks"]} == {
        ("orders-app", 1),
        ("orders-web", 2),
    }
    assert all(s["app_id"] == f"stream-sink:{s['job']}:{s['sink']}" for s in shown["sinks"])
