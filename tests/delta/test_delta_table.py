"""The Delta table format: log, checkpoints, statistics, features, torn files, and
interop with delta-rs and DuckDB's delta extension both ways.

Tests stream_sink.delta.table: DeltaTable.
Tests stream_sink.delta.replay: snapshots built from the newest checkpoint and the commits
after it.
Tests stream_sink.delta.snapshot: a version's state and its reconciliation rules.
Tests stream_sink.delta.scan: a snapshot's rows.
Tests stream_sink.delta.features: unsupported reader and writer features refused by name.
Tests stream_sink.delta.schema: schema strings, crafted ones refused."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from dataclasses import replace

import pyarrow as pa
import pytest
from delta_readers import by_key, delta_rs_rows, delta_rs_version, duckdb_delta_rows

from stream_sink.delta import DeltaTable, Protocol
from stream_sink.delta.actions import action_to_json
from stream_sink.exceptions import CorruptMetadataError, UnsupportedError

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("x", pa.float64()),
    ]
)


def rows(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "id": list(ids),
            "p": ["a b" if i % 2 else "x/y" for i in ids],
            "ts": [dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)] * n,
            "d": [dt.date(2024, 1, 1 + i % 28) for i in ids],
            "x": [None if i % 3 == 0 else i / 2 for i in ids],
        },
        schema=SCHEMA,
    )


def test_appends_read_back_by_us_delta_rs_and_duckdb_at_every_version(tmp_path):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA, partition_by=["p"])
    expected: list[dict] = []
    for v in range(1, 13):
        batch = rows(v * 10, 4)
        assert table.append(batch) == v
        expected.extend(batch.to_pylist())
        want = by_key(expected, "id")
        assert by_key(table.to_arrow().to_pylist(), "id") == want
        assert by_key(delta_rs_rows(loc), "id") == want
        assert by_key(duckdb_delta_rows(loc, v), "id") == want
    assert os.path.exists(f"{loc}/_delta_log/00000000000000000010.checkpoint.parquet")
    with open(f"{loc}/_delta_log/_last_checkpoint") as f:
        assert json.load(f)["version"] == 10


def test_checkpoint_alone_reconstructs_the_table_for_every_reader(tmp_path):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA, partition_by=["p"])
    for v in range(1, 12):
        table.append(rows(v * 10, 3))
    want = by_key(table.to_arrow().to_pylist(), "id")
    for v in range(10):  # history before the checkpoint is gone: only it can answer
        os.remove(f"{loc}/_delta_log/{v:020d}.json")
    assert by_key(DeltaTable.load(loc).to_arrow().to_pylist(), "id") == want
    assert by_key(delta_rs_rows(loc), "id") == want
    assert by_key(duckdb_delta_rows(loc), "id") == want


def test_file_statistics_bound_every_value(tmp_path):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA)
    table.append(rows(0, 6))
    (add,) = table.snapshot.files.values()
    stats = json.loads(add.stats)
    assert stats["numRecords"] == 6
    assert stats["minValues"]["id"] == 0 and stats["maxValues"]["id"] == 5
    assert stats["nullCount"]["x"] == 2
    # 00:00:00.0015 lies inside [.001, .002]: the max is rounded up, the min down
    assert stats["minValues"]["ts"] == "2024-01-01T00:00:00.001Z"
    assert stats["maxValues"]["ts"] == "2024-01-01T00:00:00.002Z"
    assert stats["minValues"]["d"] == "2024-01-01"


def test_table_written_by_delta_rs_is_read_and_appended_by_us(tmp_path):
    from deltalake import write_deltalake

    loc = str(tmp_path / "t")
    write_deltalake(loc, rows(0, 5), partition_by=["p"])
    write_deltalake(loc, rows(5, 5), mode="append", partition_by=["p"])
    table = DeltaTable.load(loc)
    assert table.version == 1 and table.partition_columns == ("p",)
    assert table.append(rows(10, 5)) == 2
    want = by_key(rows(0, 15).to_pylist(), "id")
    assert by_key(table.to_arrow().to_pylist(), "id") == want
    assert by_key(delta_rs_rows(loc), "id") == want
    assert by_key(duckdb_delta_rows(loc), "id") == want


def test_table_written_by_us_is_appended_by_delta_rs(tmp_path):
    from deltalake import write_deltalake

    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA, partition_by=["p"])
    table.append(rows(0, 5))
    write_deltalake(loc, rows(5, 5), mode="append")
    assert delta_rs_version(loc) == 2
    want = by_key(rows(0, 10).to_pylist(), "id")
    assert by_key(table.refresh().to_arrow().to_pylist(), "id") == want
    assert by_key(duckdb_delta_rows(loc), "id") == want


def test_timestamp_without_zone_needs_the_timestamp_ntz_feature(tmp_path):
    loc = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
    table = DeltaTable.create(loc, schema)
    assert table.snapshot.protocol == Protocol(3, 7, ("timestampNtz",), ("timestampNtz",))
    table.append(pa.table({"id": [1], "ts": [dt.datetime(2024, 5, 1, 12)]}, schema=schema))
    assert delta_rs_rows(loc) == [{"id": 1, "ts": dt.datetime(2024, 5, 1, 12)}]


def _set_protocol(loc: str, protocol: Protocol) -> None:
    line = json.dumps(action_to_json(protocol)) + "\n"
    with open(f"{loc}/_delta_log/{1:020d}.json", "w") as f:
        f.write(line)


def test_table_needing_unsupported_reader_features_is_refused_naming_them(tmp_path):
    loc = str(tmp_path / "t")
    DeltaTable.create(loc, SCHEMA)
    features = ("deletionVectors", "rowIdsV9", "catalogManaged")
    _set_protocol(loc, Protocol(3, 7, features, features))
    wanted = r"reader features \['catalogManaged', 'rowIdsV9'\]"
    with pytest.raises(UnsupportedError, match=wanted):
        DeltaTable.load(loc)


def test_variant_features_listed_without_a_variant_column_are_accepted(tmp_path):
    """delta-rs 1.x lists variantType on every table it creates with table features."""
    loc = str(tmp_path / "t")
    DeltaTable.create(loc, SCHEMA)
    features = ("deletionVectors", "variantType")
    _set_protocol(loc, Protocol(3, 7, features, features))
    table = DeltaTable.load(loc)
    table.append(rows(0, 2))
    assert table.to_arrow().num_rows == 2


def test_table_needing_unsupported_writer_features_is_refused_naming_them(tmp_path):
    loc = str(tmp_path / "t")
    DeltaTable.create(loc, SCHEMA)
    _set_protocol(loc, Protocol(1, 7, None, ("appendOnly", "rowTracking")))
    table = DeltaTable.load(loc)  # readable
    with pytest.raises(UnsupportedError, match=r"writer features \['rowTracking'\]"):
        table.append(rows(0, 1))
    _set_protocol(loc, Protocol(1, 4))
    with pytest.raises(UnsupportedError, match="writer version 4 needs changeDataFeed"):
        DeltaTable.load(loc).append(rows(0, 1))


@pytest.mark.parametrize("garbage", [b'{"add": {"path": "a.parq', b"\x00\x01garbage\n"])
def test_torn_or_garbage_version_file_is_an_error_naming_the_version(tmp_path, garbage):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA)
    table.append(rows(0, 2))
    with open(f"{loc}/_delta_log/{2:020d}.json", "wb") as f:
        f.write(garbage)
    with pytest.raises(CorruptMetadataError, match="version 2"):
        DeltaTable.load(loc)
    with pytest.raises(CorruptMetadataError, match="version 2"):
        table.refresh()


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "line",
    [
        DEEP,
        '{"add": {"path": "a.parquet", "partitionValues": {}, "size": 1e400, '
        '"modificationTime": 0, "dataChange": true}}',
        '{"add": {"path": "a.parquet", "partitionValues": {"p": [1]}, "size": 1, '
        '"modificationTime": 0, "dataChange": true}}',
        '{"protocol": {"minReaderVersion": 1e400, "minWriterVersion": 2}}',
        '{"add": {"path": "a.parquet", "partitionValues": {}, "size": ' + "9" * 5000 + "}}",
    ],
    ids=["nested past the recursion limit", "size 1e400", "partition value a list",
         "reader version 1e400", "a 5000-digit size"],
)  # fmt: skip
def test_a_crafted_version_file_is_an_error_naming_the_version(tmp_path, line):
    loc = str(tmp_path / "t")
    DeltaTable.create(loc, SCHEMA).append(rows(0, 2))
    with open(f"{loc}/_delta_log/{2:020d}.json", "w") as f:
        f.write(line + "\n")
    with pytest.raises(CorruptMetadataError, match=r"version 2 \(0+2\.json\)"):
        DeltaTable.load(loc)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "struct", "fields": [{"name": "id", "type": "long", "metadata": []}]},
        {"type": "struct", "fields": [{"type": "long"}]},
        {"type": "struct", "fields": [7]},
        {"type": "struct", "fields": [{"name": "id", "type": "long",
                                       "metadata": {"delta.typeChanges": "int"}}]},
        "nested",
    ],
    ids=["metadata a list", "field without a name", "field a number",
         "type changes a string", "nested 200 deep"],
)  # fmt: skip
def test_a_crafted_schema_string_is_an_error_naming_the_table(tmp_path, schema):
    if schema == "nested":
        inner = '"long"'
        for _ in range(200):
            inner = '{"type": "array", "elementType": ' + inner + ', "containsNull": true}'
        text = '{"type": "struct", "fields": [{"name": "a", "type": ' + inner + "}]}"
    else:
        text = json.dumps(schema)
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA)
    table.append(rows(0, 2))
    metadata = replace(table.snapshot.metadata, schema_string=text)
    with open(f"{loc}/_delta_log/{2:020d}.json", "w") as f:
        f.write(json.dumps(action_to_json(metadata)) + "\n")
    with pytest.raises(CorruptMetadataError, match=r"t at version 2: malformed Delta schema"):
        DeltaTable.load(loc)


def test_garbage_checkpoint_is_an_error_naming_its_version(tmp_path):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA, configuration={"delta.checkpointInterval": "2"})
    table.append(rows(0, 2))
    table.append(rows(2, 2))
    path = f"{loc}/_delta_log/{2:020d}.checkpoint.parquet"
    with open(path, "wb") as f:
        f.write(b"PAR1 not really")
    with pytest.raises(CorruptMetadataError, match="checkpoint of version 2"):
        DeltaTable.load(loc)


def test_missing_version_in_the_middle_is_an_error_naming_it(tmp_path):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA)
    for i in range(3):
        table.append(rows(i, 1))
    os.remove(f"{loc}/_delta_log/{2:020d}.json")
    with pytest.raises(CorruptMetadataError, match="version 2 is missing"):
        DeltaTable.load(loc)


def test_time_travel_reads_each_version(tmp_path):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA)
    for i in range(3):
        table.append(rows(i * 10, 2))
    assert table.to_arrow(version=1).num_rows == 2
    assert DeltaTable.load(loc, version=2).to_arrow().num_rows == 4
    shutil.rmtree(f"{loc}/_delta_log")
    assert not DeltaTable.is_delta_table(loc)


def test_loading_and_refreshing_list_the_log_once(tmp_path, monkeypatch):
    """One LIST of ``_delta_log`` per load or refresh: a request on an object store."""
    from stream_sink.io.fileio import FileIO

    location = str(tmp_path / "t")
    DeltaTable.create(location, SCHEMA)
    for i in range(3):
        DeltaTable.load(location).append(rows(10 * i, 2))
    listed = []
    real = FileIO.list_dir
    monkeypatch.setattr(FileIO, "list_dir", lambda self, loc: listed.append(loc) or real(self, loc))
    table = DeltaTable.load(location)
    assert len(listed) == 1 and table.version == 3
    assert DeltaTable.is_delta_table(location) and len(listed) == 2
