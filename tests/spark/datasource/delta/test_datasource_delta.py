"""``format("stream_sink")`` with ``.option("target", "delta")``: append and upsert
streams into Delta tables exactly once across restarts, batch append and overwrite, and
the errors a user meets at the start of the query; every table read back by delta-rs and
DuckDB's delta extension.

Tests stream_sink.spark.datasource.delta.commit: the driver's commit.
Tests stream_sink.spark.datasource.delta.write: the executors' task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from delta_readers import delta_rs_rows, duckdb_delta_rows
from streams import write_batches

from stream_sink.delta import DeltaTable
from stream_sink.spark import register
from stream_sink.spark.datasource.register import supports_data_source

pytestmark = pytest.mark.skipif(
    not supports_data_source(), reason="Spark's Python Data Source API needs pyspark >= 4.0"
)


def stream(spark: Any, root: Path, name: str, schema: str, **options: str) -> Any:
    """An available-now query over ``root/<name>-in`` into the Delta table ``root/<name>``."""
    register(spark)
    df = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(root / f"{name}-in"))
    )
    if options.get("mode") in ("upsert", "changelog"):
        df = df.repartition("id")
    writer = (
        df.writeStream.format("stream_sink")
        .option("target", "delta")
        .option("state-dir", str(root / "state"))
        .option("checkpointLocation", str(root / f"chk-{name}"))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start(str(root / name))


def both_readers(location: str) -> list[list[dict[str, Any]]]:
    return [delta_rs_rows(location), duckdb_delta_rows(location)]


def test_append_stream_into_delta_exactly_once_across_restart(spark: Any, tmp_path: Path) -> None:
    batches = [[{"id": f * 10 + i, "p": f"p{i % 2}"} for i in range(10)] for f in range(3)]
    write_batches(tmp_path / "events-in", batches)
    stream(spark, tmp_path, "events", "id long, p string", partition_by="p").awaitTermination()
    write_batches(tmp_path / "events-in", [[{"id": 30 + i, "p": "p0"} for i in range(5)]], first=3)
    stream(spark, tmp_path, "events", "id long, p string", partition_by="p").awaitTermination()
    table = DeltaTable.load(str(tmp_path / "events"))
    assert list(table.partition_columns) == ["p"]
    for rows in both_readers(table.location):
        assert sorted(r["id"] for r in rows) == list(range(35))
    (app,) = table.snapshot.txns
    marks = [table.snapshot_at(v).txn_version(app) for v in range(1, table.version + 1)]
    assert marks == [0, 1, 2, 3]  # one version per micro-batch, one query id


def test_upsert_stream_into_delta_keeps_each_keys_last_change(spark: Any, tmp_path: Path) -> None:
    batches = [
        [{"id": i % 4, "data": f"v{b}-{i}", "seq": b * 100 + i} for i in range(12)]
        for b in range(2)
    ]
    batches.append([{"id": 0, "data": "late", "seq": 1}, {"id": 9, "data": "new", "seq": 300}])
    write_batches(tmp_path / "latest-in", batches)
    q = stream(
        spark,
        tmp_path,
        "latest",
        "id long, data string, seq long",
        mode="upsert",
        equality_fields="id",
        order_by="seq",
    )
    q.awaitTermination()
    want = sorted([(k, f"v1-{8 + k}") for k in range(1, 4)] + [(0, "late"), (9, "new")])
    table = DeltaTable.load(str(tmp_path / "latest"))
    for rows in both_readers(table.location):
        assert sorted((r["id"], r["data"]) for r in rows) == want
    infos = [table.log.read_commit(v)[0] for v in range(1, table.version + 1)]
    # the first batch only adds; the later ones rewrite the files holding their keys
    assert [i.values["operation"] for i in infos] == ["WRITE", "MERGE", "MERGE"]  # type: ignore[union-attr]


def test_batch_append_and_overwrite_into_delta(spark: Any, tmp_path: Path) -> None:
    register(spark)
    df = spark.createDataFrame([(i, f"p{i % 2}") for i in range(6)], "id long, p string")
    path = str(tmp_path / "t")

    def save(frame: Any, mode: str) -> None:
        frame.write.format("stream_sink").option("target", "delta").option(
            "partition-by", "p"
        ).mode(mode).save(path)

    save(df, "append")
    save(df, "append")
    assert sorted(r["id"] for r in delta_rs_rows(path)) == sorted(list(range(6)) * 2)
    save(df.where("p = 'p0'"), "overwrite")  # replaces partition p0 only
    for rows in both_readers(path):
        assert sorted(r["id"] for r in rows) == sorted([0, 2, 4, 1, 3, 5, 1, 3, 5])


def test_bad_delta_options_fail_at_start_naming_the_fix(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "t-in", [[{"id": 1, "data": "a"}]])
    with pytest.raises(Exception, match=r"needs \.option\('order-by'"):
        stream(
            spark, tmp_path, "t", "id long, data string", mode="upsert", equality_fields="id"
        ).awaitTermination()
    with pytest.raises(Exception, match="is for Iceberg tables"):
        stream(spark, tmp_path, "t", "id long, data string", table="db.t").awaitTermination()
    DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    with pytest.raises(Exception, match=r"not in the table"):
        stream(spark, tmp_path, "t", "id long, data string").awaitTermination()
    assert not list((tmp_path / "t").rglob("*.parquet"))
    write_batches(tmp_path / "u-in", [[{"id": 1, "data": "a"}]])
    with pytest.raises(Exception, match=r"lacks \['lsn'\], named by row-kind-column or order-by"):
        stream(
            spark,
            tmp_path,
            "u",
            "id long, data string",
            **{"mode": "upsert", "equality-fields": "id", "order-by": "lsn"},
        ).awaitTermination()
    assert not list((tmp_path / "u").rglob("*.parquet"))


def test_changelog_stream_into_delta_applies_deletes_and_updates(
    spark: Any, tmp_path: Path
) -> None:
    def change(op: str, key: int, data: str, seq: int) -> dict[str, Any]:
        return {"op": op, "id": key, "data": data, "seq": seq}

    batches = [
        [change("+I", k, f"a{k}", k) for k in range(3)],
        [change("-U", 0, "a0", 10), change("+U", 0, "b0", 11), change("-D", 1, "a1", 12)],
    ]
    write_batches(tmp_path / "cl-in", batches)
    stream(
        spark,
        tmp_path,
        "cl",
        "op string, id long, data string, seq long",
        mode="changelog",
        row_kind_column="op",
        equality_fields="id",
        order_by="seq",
    ).awaitTermination()
    table = DeltaTable.load(str(tmp_path / "cl"))
    assert table.schema.names == ["id", "data", "seq"]  # the row kind column is not stored
    for rows in both_readers(table.location):
        assert sorted((r["id"], r["data"]) for r in rows) == [(0, "b0"), (2, "a2")]


@pytest.mark.slow
def test_changelog_stream_with_spilled_keys_is_exact(spark: Any, tmp_path: Path) -> None:
    """``driver-key-limit`` 0: the commit never holds the batch's keys, it streams the
    files the tasks spilled them to; keys repeat within a batch, across the tasks' batches
    and across batches, with deletes; the spill files are gone after each commit."""
    import random

    rng, model, seq = random.Random(11), {}, 0
    batches = []
    for _ in range(3):
        rows = []
        for _ in range(300):
            key, seq = rng.randrange(120), seq + 1
            op = rng.choice(["+I", "+U", "+U", "-D"])
            rows.append({"op": op, "id": key, "data": f"d{seq}", "seq": seq})
            if op == "-D":
                model.pop(key, None)
            else:
                model[key] = f"d{seq}"
        batches.append(rows)
    write_batches(tmp_path / "sp-in", batches)
    stream(
        spark,
        tmp_path,
        "sp",
        "op string, id long, data string, seq long",
        mode="changelog",
        row_kind_column="op",
        equality_fields="id",
        order_by="seq",
        **{"driver-key-limit": "0"},
    ).awaitTermination()
    want = sorted(model.items())
    table = DeltaTable.load(str(tmp_path / "sp"))
    for rows in both_readers(table.location):
        assert sorted((r["id"], r["data"]) for r in rows) == want
    assert table.version == 3
    spilled = tmp_path / "chk-sp" / "touched-keys"
    assert [p for p in spilled.rglob("*") if p.is_file()] == []


def test_in_sink_maintenance_compacts_and_vacuums_a_delta_stream(
    spark: Any, tmp_path: Path
) -> None:
    """``maintenance.*`` options: compaction and vacuum run in the route's commit every
    3 versions, as ``DeltaSink(maintenance=...)`` runs them; the metrics are kept in
    ``maintenance.json`` beside the checkpoints across the commits' workers; the table
    as delta-rs and DuckDB read it is the stream's last change per key."""
    from stream_sink.delta.maintenance import read_report
    from stream_sink.io.fileio import FileIO

    batches = [
        [{"id": (b * 7 + i) % 10, "p": f"p{i % 2}", "seq": b * 100 + i} for i in range(6)]
        for b in range(8)
    ]
    last = {r["id"]: r["seq"] for batch in batches for r in batch}
    write_batches(tmp_path / "m-in", batches)
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("seq", pa.int64())])
    retention = {"delta.deletedFileRetentionDuration": "interval 0 seconds"}
    DeltaTable.create(str(tmp_path / "m"), schema, partition_by=["p"], configuration=retention)
    stream(
        spark,
        tmp_path,
        "m",
        "id long, p string, seq long",
        mode="upsert",
        equality_fields="id",
        order_by="seq",
        **{"maintenance.every-versions": "3", "maintenance.min-input-files": "2"},
    ).awaitTermination()

    report = str(tmp_path / "chk-m" / "m" / "maintenance.json")
    m = read_report(FileIO.for_location(report), report)
    assert m.runs >= 2 and m.failures == 0, m.last_error
    assert m.compacted_files > 0 and m.vacuumed_files > 0
    table = DeltaTable.load(str(tmp_path / "m"))
    infos = [table.log.read_commit(v)[0] for v in range(1, table.version + 1)]
    operations = [i.values["operation"] for i in infos]  # type: ignore[union-attr]
    assert "OPTIMIZE" in operations and operations.count("MERGE") + operations.count("WRITE") == 8
    for rows in both_readers(table.location):
        assert sorted((r["id"], r["seq"]) for r in rows) == sorted(last.items())


def test_configuration_options_set_a_new_tables_configuration_and_append_only_is_honoured(
    spark: Any, tmp_path: Path
) -> None:
    """``configuration.<key>`` options configure the table the sink creates, in Delta
    Lake's spelling of the key (Spark lower-cases option keys); the sink then writes
    checkpoints every ``delta.checkpointInterval`` versions, and on a table with
    ``delta.appendOnly=true`` refuses modes that delete or replace rows before writing
    a file, on both routes."""
    from streams import run_available

    from stream_sink.spark import DeltaSink

    write_batches(tmp_path / "t-in", [[{"id": i, "data": "a"}] for i in range(3)])
    stream(
        spark,
        tmp_path,
        "t",
        "id long, data string",
        **{
            "configuration.delta.appendOnly": "true",
            "configuration.delta.checkpointInterval": "2",
            "configuration.pipeline.owner": "orders-team",
        },
    ).awaitTermination()
    loc = str(tmp_path / "t")
    table = DeltaTable.load(loc)
    assert dict(table.snapshot.configuration) == {
        "delta.appendOnly": "true",
        "delta.checkpointInterval": "2",
        "pipeline.owner": "orders-team",
    }
    assert table.version == 3  # CREATE TABLE, then one version a batch
    assert (tmp_path / "t" / "_delta_log" / f"{2:020d}.checkpoint.parquet").exists()
    for rows in both_readers(loc):
        assert sorted(r["id"] for r in rows) == [0, 1, 2]

    change = [[{"id": 1, "data": "b", "lsn": 1}]]
    write_batches(tmp_path / "t-in", change, first=3)  # the same query, now as an upsert
    write_batches(tmp_path / "u-in", change)
    with pytest.raises(Exception, match=r"delta\.appendOnly=true, which allows only appends"):
        stream(
            spark,
            tmp_path,
            "t",
            "id long, data string, lsn long",
            **{"mode": "upsert", "equality-fields": "id", "order-by": "lsn"},
        ).awaitTermination()
    sink = DeltaSink(
        path=loc,
        mode="upsert",
        equality_fields=["id"],
        order_by=["lsn"],
        checkpoint_location=str(tmp_path / "chk-u"),
        state_dir=str(tmp_path / "state"),
    )
    try:
        with pytest.raises(Exception, match=r"mode 'upsert' \(it replaces or deletes rows\)"):
            run_available(
                spark,
                tmp_path / "u-in",
                "id long, data string, lsn long",
                sink.foreach_batch,
                sink.spark_checkpoint_location,
            )
    finally:
        sink.close()
    assert DeltaTable.load(loc).version == 3
    assert len(list((tmp_path / "t").rglob("*.parquet"))) == 3 + 1  # the data and a checkpoint
