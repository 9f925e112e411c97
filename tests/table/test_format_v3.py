"""Format version 3 metadata: creating and upgrading v3 tables, row lineage ids
(next-row-id, snapshot first-row-id/added-rows, manifest and data-file first_row_id),
the v3 manifest and manifest-list schemas, and what is refused.

Tests stream_sink.cli.upgrade_command: ``stream-sink table upgrade``.
Tests stream_sink.table.row_lineage: row lineage ids."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from readers import duckdb_rows

from stream_sink.cli.main import main as cli_main
from stream_sink.exceptions import UnsupportedError, ValidationError
from stream_sink.table import avro_schemas as avro
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import ManifestContent, read_manifest, snapshot_manifests
from stream_sink.table.metadata import parse_metadata
from stream_sink.tables import IcebergTable

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "v": [f"v{i}" for i in range(n)]}, ARROW)


def data_files(t: IcebergTable) -> list[tuple[str, int | None, int]]:
    """(file name, first_row_id, record_count) of the live data files, by first_row_id."""
    out = []
    for m in snapshot_manifests(t.io, t.current_snapshot()):
        if m.content != ManifestContent.DATA:
            continue
        for e in read_manifest(t.io, m):
            if e.is_live:
                f = e.data_file
                out.append((f.file_path.rsplit("/", 1)[-1], f.first_row_id, f.record_count))
    return sorted(out, key=lambda x: (x[1] is None, x[1] or 0))


def test_a_v3_table_assigns_row_ids_to_every_append(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, format_version=3)
    assert t.format_version == 3 and t.metadata.next_row_id == 0
    t.append(rows(3))
    t.append(rows(5, 3))
    first, second = t.refresh().snapshots()
    assert (first.first_row_id, first.added_rows) == (0, 3)
    assert (second.first_row_id, second.added_rows) == (3, 5)
    assert t.metadata.next_row_id == 8
    assert [(r, n) for _, r, n in data_files(t)] == [(0, 3), (3, 5)]
    doc = json.loads(Path(t.metadata_location.removeprefix("file://")).read_text())
    assert doc["format-version"] == 3 and doc["next-row-id"] == 8
    assert doc["snapshots"][1]["first-row-id"] == 3 and doc["snapshots"][1]["added-rows"] == 5
    assert sorted(r["id"] for r in duckdb_rows(t.metadata_location)) == list(range(8))


def test_manifest_list_and_manifests_use_the_v3_schemas(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, properties={"format-version": "3"})
    t.append(rows(2))
    snap = t.current_snapshot()
    listed = avro.read_avro_file(t.io, snap.manifest_list)
    assert listed.metadata["format-version"] == "3" and listed.metadata["first-row-id"] == "0"
    assert 520 in avro.RecordView(listed.schema).field_ids()
    (m,) = snapshot_manifests(t.io, snap)
    assert m.first_row_id == 0
    manifest = avro.read_avro_file(t.io, m.manifest_path)
    file_view = avro.RecordView(manifest.schema).child(2, avro.named_types(manifest.schema))
    assert {142, 143, 144, 145} <= set(file_view.field_ids())
    assert manifest.metadata["format-version"] == "3"


def test_upgrade_is_a_metadata_only_commit_and_old_files_get_ids_on_the_next(
    hadoop_catalog: Catalog,
) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW)
    t.append(rows(4))
    before = t.current_snapshot()
    t.upgrade_format_version(3)
    assert t.format_version == 3 and t.metadata.next_row_id == 0
    assert t.refresh().current_snapshot() == before  # no snapshot, none rewritten
    assert before.first_row_id is None
    assert [r for _, r, _ in data_files(t)] == [None]  # pre-v3 files have no row ids
    t.append(rows(2, 4))
    snap = t.refresh().current_snapshot()
    # the carried manifest of the v2 snapshot gets ids for its existing rows too
    assert snap.first_row_id == 0 and snap.added_rows == 6 and t.metadata.next_row_id == 6
    assert sorted(r for _, r, _ in data_files(t)) == [0, 2] or sorted(
        r for _, r, _ in data_files(t)
    ) == [0, 4]
    assert sorted(r["id"] for r in t.scan().to_arrow().to_pylist()) == list(range(6))
    assert sorted(r["id"] for r in duckdb_rows(t.metadata_location)) == list(range(6))
    t.upgrade_format_version(3)  # same version: nothing happens
    with pytest.raises(ValidationError, match="cannot be downgraded"):
        t.upgrade_format_version(2)
    with pytest.raises(UnsupportedError, match="format version 4 is newer"):
        t.upgrade_format_version(4)


def test_the_cli_upgrades_a_table(
    hadoop_catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW)
    warehouse = hadoop_catalog.properties["warehouse"]
    assert cli_main(["table", "upgrade", "db.t", "--warehouse", warehouse]) == 0
    assert "format version 2 -> 3" in capsys.readouterr().out
    assert t.refresh().format_version == 3
    assert cli_main(["table", "upgrade", "db.t", "--warehouse", warehouse]) == 0
    assert "already is format version 3" in capsys.readouterr().out


def test_write_format_version_property_creates_a_v3_table(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, properties={"write.format-version": "3"})
    assert t.format_version == 3 and "write.format-version" not in t.properties
    with pytest.raises(ValidationError, match="not a format version"):
        hadoop_catalog.create_table("db.u", ARROW, properties={"format-version": "three"})


def test_future_versions_stay_unsupported_and_v3_reads_without_next_row_id() -> None:
    with pytest.raises(UnsupportedError, match="format version 4 is newer"):
        parse_metadata('{"format-version": 4}', where="/t/v9.metadata.json")
    doc = {
        "format-version": 3,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": "/t",
        "last-sequence-number": 0,
        "last-updated-ms": 1,
        "last-column-id": 1,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": []}],
        "current-schema-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "default-spec-id": 0,
    }
    missing = parse_metadata(json.dumps(doc), where="/t/v1.metadata.json")
    assert missing.next_row_id is None and "next-row-id" not in json.loads(missing.to_json())
    with pytest.raises(UnsupportedError, match="has no next-row-id"):
        missing.require_next_row_id()
    meta = parse_metadata(json.dumps({**doc, "next-row-id": 7}))
    assert meta.format_version == 3 and meta.next_row_id == 7
    assert json.loads(meta.to_json())["next-row-id"] == 7


def test_a_v3_table_without_next_row_id_reads_and_refuses_a_write_saying_what_to_do(
    hadoop_catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    """As writers that assign no row ids leave a v3 table (a timestamptz_ns column):
    pyiceberg and ours read it; a write is refused before it commits, leaving no file."""
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns", tz="UTC"))])
    t = hadoop_catalog.create_table("db.ns", schema, format_version=3)
    t.append(pa.table({"id": [1, 2], "ts": pa.array([1, 2], pa.timestamp("ns", tz="UTC"))}))
    current = Path(t.refresh().metadata_location)
    doc = json.loads(current.read_text())
    del doc["next-row-id"]
    current.write_text(json.dumps(doc))
    table = hadoop_catalog.load_table("db.ns")
    assert table.scan().to_arrow().column("id").to_pylist() == [1, 2]
    from pyiceberg.table import StaticTable

    theirs = StaticTable.from_metadata(str(current)).scan().to_arrow()
    assert sorted(theirs.column("id").to_pylist()) == [1, 2]
    assert cli_main(["read", table.location, "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    before = sorted(Path(table.location).rglob("*"))
    with pytest.raises(UnsupportedError, match=r"has no next-row-id.*nothing was written") as e:
        table.append(pa.table({"id": [3], "ts": pa.array([3], pa.timestamp("ns", tz="UTC"))}))
    assert "copy its rows into a new table" in str(e.value)
    assert sorted(Path(table.location).rglob("*")) == before


def lineage(t: IcebergTable) -> dict[int, tuple[int, int]]:
    cols = ["id", "_row_id", "_last_updated_sequence_number"]
    got = t.refresh().scan(columns=cols).to_arrow().to_pylist()
    return {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in got}


def test_reads_project_row_lineage_and_compaction_keeps_it(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, identifier_fields=["id"], format_version=3)
    t.append(rows(3))  # ids 0..2, sequence number 1
    t.append(rows(2, 3))  # ids 3..4, sequence number 2
    t.upsert(pa.table({"id": [1], "v": ["new"]}, ARROW))  # an update gets a new row id
    before = lineage(t)
    assert before[0] == (0, 1) and before[2] == (2, 1) and before[3] == (3, 2)
    assert before[1] == (5, 3)  # the updated row: new id, last updated by snapshot 3
    t.maintenance.rewrite_data_files(min_input_files=1)
    assert len(data_files(t)) == 1
    assert lineage(t) == before  # rewritten rows keep their ids and sequence numbers
    with pytest.raises(ValidationError, match="row lineage"):
        hadoop_catalog.create_table("db.v2", ARROW).scan(columns=["id", "_row_id"])


def test_a_column_added_with_a_default_on_v3(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, format_version=3)
    t.append(rows(2))
    with t.update_schema() as u:
        u.add_column("region", "string", default="eu")
        u.add_column("qty", "int", required=True, default=1)  # required: fine with a default
    t.append(pa.table({"id": [9], "v": ["x"]}, ARROW))  # lacks both: write-defaults stored
    got = sorted(t.refresh().scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["region"], r["qty"]) for r in got] == [(0, "eu", 1), (1, "eu", 1),
                                                                (9, "eu", 1)]  # fmt: skip
    field = t.schema().find_field("region")
    assert (field.initial_default, field.write_default) == ('"eu"', '"eu"')
    v2 = hadoop_catalog.create_table("db.v2", ARROW)
    with pytest.raises(ValidationError, match="format version 3"), v2.update_schema() as u:
        u.add_column("region", "string", default="eu")
    with pytest.raises(ValidationError, match="not a int"), t.update_schema() as u:
        u.add_column("bad", "int", default="seven")


def test_a_rest_commit_expresses_the_upgrade_and_v3_snapshot_fields(
    hadoop_catalog: Catalog,
) -> None:
    from stream_sink.table.catalog.rest.changes import table_changes

    t = hadoop_catalog.create_table("db.t", ARROW)
    base = t.metadata
    upgraded = base.with_format_version(3)
    assert {"action": "upgrade-format-version", "format-version": 3} in table_changes(
        base, upgraded
    ).updates
    t.upgrade_format_version(3)
    before = t.metadata
    t.append(rows(2))
    (added,) = [
        u for u in table_changes(before, t.metadata).updates if u["action"] == "add-snapshot"
    ]
    assert added["snapshot"]["first-row-id"] == 0 and added["snapshot"]["added-rows"] == 2
