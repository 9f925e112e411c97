"""Flink's own Iceberg sink beside ours on the same input: the same Debezium JSON files
through Flink SQL (``debezium-json`` changelog, ``IcebergSink`` with ``upsert-enabled``,
parallelism 2; ``peer flink``, see ``tests/peers/flink.py``) into one table and through
``from_debezium`` and our upsert sink into another; and plain JSON rows appended by each.

Flink's checkpoints are aligned to our micro-batches: Flink is handed the files one at a
time, each once the previous one is committed, and our stream takes one file per
micro-batch. So after each file both tables hold a snapshot of the same changes, and the
rows of every such snapshot and of the final tables must be identical, as Apache Iceberg
Java reads them (one JVM call) and as our reader reads them. The Flink job runs while our
stream does.
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kill_harness import write_batches
from peers.readers import PEER, TIMEOUT_S

import stream_sink as ss
from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, IcebergSink, from_debezium

pytestmark = [pytest.mark.slow, pytest.mark.interop]

FILES = 3
COLUMNS = ("id", "data", "amount", "qty")
FLINK_COLUMNS = "id BIGINT, data STRING, amount DOUBLE, qty INT"
ROW_SCHEMA = "id long, data string, amount double, qty int"
ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("data", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("qty", pa.int32()),
    ]
)


def changes(files: int, seed: int) -> list[list[dict[str, Any]]]:
    """Debezium events over 60 keys: creates, updates (with before images, as Flink's
    ``debezium-json`` needs), deletes and re-creates, within and across files."""
    rng = random.Random(seed)
    live: dict[int, dict[str, Any]] = {}
    lsn = 0
    batches = []
    for f in range(files):
        batch = []
        for i in range(70):
            lsn += 1
            key = rng.randrange(60)
            row = {"id": key, "data": f"f{f}-{i}", "amount": lsn / 4, "qty": rng.randrange(9)}
            old = live.get(key)
            if old is None:
                op, before, after = "c", None, row
            elif rng.random() < 0.25:
                op, before, after = "d", old, None
            else:
                op, before, after = "u", old, row
            if after is None:
                del live[key]
            else:
                live[key] = after
            source = {"lsn": lsn, "db": "shop", "table": "t"}
            batch.append({"op": op, "before": before, "after": after, "source": source})
        batches.append(batch)
    return batches


def appended(files: int) -> list[list[dict[str, Any]]]:
    return [
        [{"id": f * 50 + i, "data": f"f{f}", "amount": i / 2, "qty": i % 7} for i in range(50)]
        for f in range(files)
    ]


class Flink:
    """``peer flink`` over both inputs, aligned (one job, both tables), running in the
    background; its log in a temporary file, shown when it fails."""

    def __init__(self, root: Path, upserts: Path, appends: Path) -> None:
        path = root / "flink-spec.json"
        path.write_text(json.dumps(flink_spec(root, upserts, appends)))
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by result/stop)
        self.proc = subprocess.Popen(
            ["bash", str(PEER), "flink", str(path)],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def result(self) -> dict[str, Any]:
        """The job's answer (see flink.py), once it ended."""
        out, _ = self.proc.communicate(timeout=TIMEOUT_S)
        if self.proc.returncode != 0:
            self.log.seek(0)
            tail = self.log.read()[-6000:]
            raise AssertionError(f"peer flink failed ({self.proc.returncode}):\n{tail}")
        return dict(json.loads(out.strip().splitlines()[-1]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def flink_spec(root: Path, upserts: Path, appends: Path) -> dict[str, Any]:
    pipes = [
        ("db.upsert", ["id"], "debezium-json", True, upserts),
        ("db.append", None, "json", False, appends),
    ]
    return {
        "warehouse": str(root / "flink-warehouse"),
        "parallelism": 2,
        "checkpoint_ms": 300,
        "aligned": True,
        "pipelines": [
            {
                "table": table,
                "columns": FLINK_COLUMNS,
                "key": key,
                "format": fmt,
                "upsert": upsert,
                "source": str(root / f"flink-{table}"),
                "files": sorted(str(p) for p in source.glob("*.json")),
            }
            for table, key, fmt, upsert, source in pipes
        ],
    }


def run_ours(spark: Any, df: Any, sink: IcebergSink) -> None:
    query = (
        df.writeStream.foreachBatch(sink.foreach_batch)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        sink.close()


def rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True))


def test_flink_and_our_sink_write_identical_tables_snapshot_by_snapshot(
    spark: Any, java_read: Any, tmp_path: Path
) -> None:
    upserts, appends = tmp_path / "in-upsert", tmp_path / "in-append"
    write_batches(upserts, changes(FILES, seed=24))
    write_batches(appends, appended(FILES))
    flink = Flink(tmp_path, upserts, appends)
    try:
        ours = ss.load_catalog("ours", type="hadoop", warehouse=str(tmp_path / "warehouse"))
        ours.create_namespace("db")
        ours.create_table("db.upsert", schema=ARROW_SCHEMA, identifier_fields=["id"])
        ours.create_table("db.append", schema=ARROW_SCHEMA)
        common = {"catalog": ours, "state_dir": str(tmp_path / "state")}
        cdc = from_debezium(
            spark.readStream.option("maxFilesPerTrigger", 1).text(str(upserts)),
            row_schema=ROW_SCHEMA,
            order_by="source.lsn",
        )
        upsert_sink = IcebergSink(
            table="db.upsert",
            mode="upsert",
            row_kind_column=ROW_KIND_COLUMN,
            order_by=ORDER_COLUMN,
            checkpoint_location=str(tmp_path / "chk-upsert"),
            **common,
        )
        run_ours(spark, cdc, upsert_sink)
        plain = (
            spark.readStream.schema(ROW_SCHEMA).option("maxFilesPerTrigger", 1).json(str(appends))
        )
        append_sink = IcebergSink(
            table="db.append", checkpoint_location=str(tmp_path / "chk-append"), **common
        )
        run_ours(spark, plain, append_sink)
        result = flink.result()
    finally:
        flink.stop()

    theirs = ss.load_catalog("flink", type="hadoop", warehouse=str(tmp_path / "flink-warehouse"))
    locations: list[str] = []
    for name in ("db.upsert", "db.append"):
        our_snaps = [s.snapshot_id for s in ours.load_table(name).snapshots()]
        flink_snaps = result["tables"][name]["after_file"]
        assert len(our_snaps) == len(flink_snaps) == FILES, name
        ours_loc = ours.load_table(name).metadata_location
        flink_loc = theirs.load_table(name).metadata_location
        locations += [f"{ours_loc}@{a}" for a in our_snaps] + [ours_loc]
        locations += [f"{flink_loc}@{b}" for b in flink_snaps] + [flink_loc]
    java = iter(java_read(locations))

    for name in ("db.upsert", "db.append"):
        our_table, flink_table = ours.load_table(name), theirs.load_table(name)
        our_snaps = [s.snapshot_id for s in our_table.snapshots()]
        flink_snaps = result["tables"][name]["after_file"]
        java_ours = [rows(next(java)) for _ in range(FILES + 1)]
        java_flink = [rows(next(java)) for _ in range(FILES + 1)]
        for i, (a, b) in enumerate(zip(our_snaps, flink_snaps, strict=True)):
            expected = rows(our_table.scan(snapshot_id=a).to_arrow())
            assert expected, f"{name} after file {i}: no rows"
            assert rows(flink_table.scan(snapshot_id=b).to_arrow()) == expected, (name, i)
            assert java_ours[i] == java_flink[i] == expected, (name, i)
        final = rows(our_table.scan().to_arrow())
        assert rows(flink_table.scan().to_arrow()) == final == java_ours[-1] == java_flink[-1]
