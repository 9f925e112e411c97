"""Conformance: Delta tables of every shape real writers produce, read by ours, delta-rs
(its query engine, which applies deletion vectors and column mapping) and DuckDB's delta
extension, all equal; deliberately broken tables refused with an error naming the
problem.

Shapes delta-rs writes itself are written by it (schema evolution); the others are built
by hand from the protocol (:mod:`delta_tables`, which says why) and are checked by
the independent readers as much as ours.

Tests stream_sink.delta.type_widening: tables whose schema records widened types.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from delta_readers import by_key, delta_rs_query_rows, duckdb_delta_rows
from delta_tables import (
    action_parquet,
    append_and_upsert_into,
    commit,
    data_file,
    delta_rs_table_with_dvs_and_mapping,
    dv_file,
    field,
    inline_dv,
    metadata,
    protocol,
    struct_type,
    with_field_ids,
)
from peers.readers import read_with_delta

from stream_sink.delta import DeltaTable
from stream_sink.exceptions import (
    CorruptionError,
    CorruptMetadataError,
    MissingFileError,
    UnsupportedError,
)

UTC = dt.timezone.utc
ID_V = struct_type(field("id", "long"), field("v", "string"))


def _ids(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + n), pa.int64()), "v": [f"r{i}" for i in range(n)]}
    )


# --- shapes ------------------------------------------------------------------------------


def schema_evolution(loc: str) -> None:
    """delta-rs: a column and a struct field added after the first file was written."""
    from deltalake import write_deltalake

    first = pa.table({"id": [1, 2], "s": [{"x": 1}, None]})
    write_deltalake(loc, first)
    second = pa.table(
        {"id": [3], "s": [{"x": 3, "y": "new"}], "added": pa.array([dt.date(2024, 1, 2)])}
    )
    write_deltalake(loc, second, mode="append", schema_mode="merge")


def int96_edge(loc: str) -> None:
    """INT96 timestamps (as Spark and Hive write them) at the ends of their range."""
    values = [dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)]
    table = pa.table({"id": [1, 2], "ts": pa.array(values, pa.timestamp("us", tz="UTC"))})
    schema = struct_type(field("id", "long"), field("ts", "timestamp"))
    add = data_file(loc, "part-0.parquet", table, use_deprecated_int96_timestamps=True)
    commit(loc, 0, protocol(1, 2), metadata(schema), add)


def placeholder_metadata(loc: str) -> None:
    """Delta Live Tables: a metaData without a schema, replaced by the next version's;
    reader version 2 without a column mapping mode (none)."""
    placeholder = metadata(ID_V)
    del placeholder["metaData"]["schemaString"]
    commit(loc, 0, protocol(2, 5), placeholder)
    commit(loc, 1, metadata(ID_V), data_file(loc, "part-0.parquet", _ids(3)))


def _mapped_schema() -> dict[str, Any]:
    inner = struct_type(field("x", "integer", id=4, physical="col-x"))
    return struct_type(
        field("id", "long", id=1, physical="col-id"),
        field("renamed", "string", id=2, physical="col-v"),
        field("s", inner, id=3, physical="col-s"),
        field("p", "string", id=5, physical="col-p"),
        field("readded", "long", id=7, physical="col-readded-2"),
    )


def _mapped_file(loc: str, rel: str, start: int, *, ids: bool) -> dict[str, Any]:
    """Physical names; the file predates ``readded`` (its old column is a dropped one)."""
    s_type = pa.struct([pa.field("col-x", pa.int32(), metadata={"PARQUET:field_id": "4"})])
    table = pa.table(
        {
            "col-id": pa.array([start, start + 1], pa.int64()),
            "col-v": ["a", "b"],
            "col-s": pa.array([{"col-x": start}, None], s_type),
            "col-readded-1": pa.array([99, 99], pa.int64()),  # a dropped column's data
        }
    )
    if ids:
        table = with_field_ids(table, {"col-id": 1, "col-v": 2, "col-s": 3, "col-readded-1": 6})
    return data_file(loc, rel, table, partition_values={"col-p": "east"})


def column_mapping_name(loc: str) -> None:
    """Name mode: physical names, a renamed column, a dropped and re-added one, a
    partition column keyed by its physical name."""
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "7"}
    meta = metadata(_mapped_schema(), config, ["p"])
    add = _mapped_file(loc, "col-p=east/part-0.parquet", 10, ids=True)
    commit(loc, 0, protocol(3, 7, "columnMapping"), meta, add)


def column_mapping_reader_v2(loc: str) -> None:
    """Reader version 2 / writer 5: column mapping before table features."""
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "7"}
    meta = metadata(_mapped_schema(), config, ["p"])
    add = _mapped_file(loc, "col-p=east/part-0.parquet", 20, ids=True)
    commit(loc, 0, protocol(2, 5), meta, add)


def column_mapping_id(loc: str) -> None:
    """Id mode: columns resolved by Parquet field id (the file's names are not used)."""
    config = {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": "7"}
    meta = metadata(_mapped_schema(), config, ["p"])
    add = _mapped_file(loc, "col-p=east/part-0.parquet", 30, ids=True)
    commit(loc, 0, protocol(3, 7, "columnMapping"), meta, add)


def deletion_vectors(loc: str) -> None:
    """All three storage types: a shared file at offsets under a random prefix (``u``),
    inline (``i``), an absolute path (``p``); then a second vector replacing a first."""
    config = {"delta.enableDeletionVectors": "true"}
    first, second = dv_file(loc, [[1, 3], [0, 9]], prefix="ab")
    absolute = dv_file(loc, [[5]])[0]
    absolute = dict(absolute, storageType="p", offset=absolute["offset"])
    (name,) = [n for n in os.listdir(loc) if n.startswith("deletion_vector_")]
    absolute["pathOrInlineDv"] = f"file://{loc}/{name}"
    commit(
        loc,
        0,
        protocol(3, 7, "deletionVectors"),
        metadata(ID_V, config),
        data_file(loc, "a.parquet", _ids(10, 0), deletion_vector=first),
        data_file(loc, "b.parquet", _ids(10, 100), deletion_vector=second),
        data_file(loc, "c.parquet", _ids(10, 200), deletion_vector=inline_dv([2, 4, 6])),
        data_file(loc, "d.parquet", _ids(10, 300), deletion_vector=absolute),
    )
    # version 1 deletes more rows of a.parquet: remove (path, old DV), add (path, new DV)
    (newer,) = dv_file(loc, [[1, 3, 7]])
    with open(f"{loc}/_delta_log/{0:020d}.json") as f:
        old_add = json.loads(f.read().splitlines()[3])["add"]
    remove = {
        "path": "a.parquet",
        "deletionTimestamp": 1,
        "dataChange": True,
        "deletionVector": old_add["deletionVector"],
    }
    commit(loc, 1, {"add": dict(old_add, deletionVector=newer)}, {"remove": remove})


def inline_dv_padded_tail(loc: str) -> None:
    """An inline deletion vector of 38 bytes in the Z85 the Rust ``z85`` crate writes
    (delta-rs, delta-kernel-rs): its last group, ``##`` and the tail's 2 bytes, is a
    number above 2**32 - 1."""
    dv = inline_dv([1, 4, 7], padded_tail=True)
    assert dv["pathOrInlineDv"].endswith("##0l7")
    config = {"delta.enableDeletionVectors": "true"}
    commit(loc, 0, protocol(3, 7, "deletionVectors"), metadata(ID_V, config))
    commit(loc, 1, data_file(loc, "a.parquet", _ids(12), deletion_vector=dv))


def _byte_to_narrow_decimal(loc: str) -> None:
    """byte -> decimal(5,2): the value fits, but the protocol's table (decimal(10 + k1, k2))
    and Delta Lake 4.4 on Spark refuse the change."""
    change = {"delta.typeChanges": [_change("byte", "decimal(5,2)")]}
    schema = struct_type(field("id", "long"), field("b", "decimal(5,2)", metadata=change))
    old = pa.table({"id": pa.array([1], pa.int64()), "b": pa.array([-128], pa.int8())})
    commit(
        loc,
        0,
        protocol(3, 7, "typeWidening"),
        metadata(schema, {"delta.enableTypeWidening": "true"}),
    )
    commit(loc, 1, data_file(loc, "old.parquet", old))


def _change(frm: str, to: str) -> dict[str, str]:
    return {"fromType": frm, "toType": to}


def _v2_checkpoint(loc: str, kind: str) -> None:
    """V2 spec checkpoints: UUID-named JSON or Parquet with sidecars, or classic; the
    commits before the checkpoint are gone, so only it can answer."""
    feats = ("v2Checkpoint", "deletionVectors")
    proto, meta = protocol(3, 7, *feats), metadata(ID_V, {"delta.checkpointPolicy": "v2"})
    a = data_file(loc, "a.parquet", _ids(4, 0))
    b = data_file(loc, "b.parquet", _ids(4, 10), deletion_vector=inline_dv([0]))
    commit(loc, 0, proto, meta, a)
    commit(loc, 1, b)
    commit(loc, 2, data_file(loc, "c.parquet", _ids(2, 20)))
    os.makedirs(f"{loc}/_delta_log/_sidecars", exist_ok=True)
    files = [a, b]
    txn = {"txn": {"appId": "app", "version": 3}}
    head = [{"checkpointMetadata": {"version": 1, "tags": {}}}, proto, meta, txn]
    if kind == "classic":
        rows = head + files
    else:
        sidecar = "3a0d65cd-4056-49b8-937b-95f9e3ee90e5.parquet"
        action_parquet(f"{loc}/_delta_log/_sidecars/{sidecar}", files, ["add", "remove"])
        size = os.path.getsize(f"{loc}/_delta_log/_sidecars/{sidecar}")
        rows = [*head, {"sidecar": {"path": sidecar, "sizeInBytes": size, "modificationTime": 1}}]
    stem = f"{loc}/_delta_log/{1:020d}.checkpoint"
    columns = ["checkpointMetadata", "protocol", "metaData", "txn", "add", "remove", "sidecar"]
    if kind == "json":
        with open(f"{stem}.80a083e8-7026-4e79-81be-64bd76c43a11.json", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    elif kind == "parquet":
        action_parquet(f"{stem}.80a083e8-7026-4e79-81be-64bd76c43a11.parquet", rows, columns)
    else:
        action_parquet(f"{stem}.parquet", rows, columns)
    os.remove(f"{loc}/_delta_log/{0:020d}.json")  # as log cleanup leaves it


def v2_checkpoint_json(loc: str) -> None:
    _v2_checkpoint(loc, "json")


def v2_checkpoint_parquet(loc: str) -> None:
    _v2_checkpoint(loc, "parquet")


def v2_checkpoint_classic(loc: str) -> None:
    _v2_checkpoint(loc, "classic")


def type_widening(loc: str) -> None:
    """A file written before int -> long, float -> double and decimal(5,2) ->
    decimal(10,4); one after."""

    def changes(frm: str, to: str) -> dict[str, Any]:
        return {"delta.typeChanges": [{"fromType": frm, "toType": to}]}

    schema = struct_type(
        field("id", "long", metadata=changes("integer", "long")),
        field("f", "double", metadata=changes("float", "double")),
        field("d", "decimal(10,4)", metadata=changes("decimal(5,2)", "decimal(10,4)")),
    )
    old = pa.table(
        {
            "id": pa.array([1], pa.int32()),
            "f": pa.array([1.5], pa.float32()),
            "d": pa.array([Decimal("123.45")], pa.decimal128(5, 2)),
        }
    )
    new = pa.table(
        {
            "id": pa.array([2**40], pa.int64()),
            "f": pa.array([2.25], pa.float64()),
            "d": pa.array([Decimal("123456.7891")], pa.decimal128(10, 4)),
        }
    )
    feats = ("typeWidening",)
    commit(loc, 0, protocol(3, 7, *feats), metadata(schema, {"delta.enableTypeWidening": "true"}))
    commit(loc, 1, data_file(loc, "old.parquet", old), data_file(loc, "new.parquet", new))


def multi_part_checkpoint(loc: str) -> None:
    """A V1 checkpoint in two parts (protocol and metadata, then the files); the commits
    before it cleaned up, its own version's kept (as Delta's log cleanup leaves them)."""
    proto, meta = protocol(1, 2), metadata(ID_V)
    a, b = data_file(loc, "a.parquet", _ids(2)), data_file(loc, "b.parquet", _ids(2, 10))
    commit(loc, 0, proto, meta, a)
    commit(loc, 1, b)
    columns = ["protocol", "metaData", "txn", "add", "remove"]
    stem = f"{loc}/_delta_log/{1:020d}.checkpoint"
    action_parquet(f"{stem}.0000000001.0000000002.parquet", [proto, meta], columns)
    action_parquet(f"{stem}.0000000002.0000000002.parquet", [a, b], columns)
    os.remove(f"{loc}/_delta_log/{0:020d}.json")  # as log cleanup leaves it


def vacuum_protocol_check(loc: str) -> None:
    commit(loc, 0, protocol(3, 7, "vacuumProtocolCheck"), metadata(ID_V))
    commit(loc, 1, data_file(loc, "a.parquet", _ids(3)))


SHAPES: dict[str, Callable[[str], None]] = {
    f.__name__: f
    for f in (
        schema_evolution,
        int96_edge,
        placeholder_metadata,
        column_mapping_name,
        column_mapping_reader_v2,
        column_mapping_id,
        deletion_vectors,
        inline_dv_padded_tail,
        v2_checkpoint_json,
        v2_checkpoint_parquet,
        v2_checkpoint_classic,
        type_widening,
        multi_part_checkpoint,
        vacuum_protocol_check,
    )
}
EXPECTED_ROWS = {
    "schema_evolution": 3,
    "int96_edge": 2,
    "placeholder_metadata": 3,
    "column_mapping_name": 2,
    "column_mapping_reader_v2": 2,
    "column_mapping_id": 2,
    "deletion_vectors": 31,
    "inline_dv_padded_tail": 9,
    "v2_checkpoint_json": 9,
    "v2_checkpoint_parquet": 9,
    "v2_checkpoint_classic": 9,
    "type_widening": 2,
    "vacuum_protocol_check": 3,
    "multi_part_checkpoint": 4,
}
READERS_DIFFER: dict[tuple[str, str], str] = {
    ("placeholder_metadata", "delta-rs"): "refuses a metaData without schemaString",
    ("placeholder_metadata", "duckdb"): "refuses a metaData without schemaString",
    ("type_widening", "delta-rs"): "Unsupported table features required: [TypeWidening]",
    ("vacuum_protocol_check", "delta-rs"): "Unsupported table features: [VacuumProtocolCheck]",
}
"""(shape, reader) -> why that reader cannot read that shape (asserted: it refuses)."""
SPARK_DIFFERS: dict[str, tuple[str, list[int]]] = {
    "inline_dv_padded_tail": (
        "Delta's Java decoder takes the z85 crate's padded tail modulo 2**32, so the "
        "vector's last row reads as 28168 instead of 7 and row 7 stays; delta-kernel-rs "
        "(delta-rs, DuckDB) and ours read the tail as its writer meant it",
        [0, 2, 3, 5, 6, 7, 8, 9, 10, 11],
    ),
}
"""shape -> why Delta Lake on Spark reads it otherwise than delta-rs, DuckDB and ours,
and the ids it reads (asserted, so a change on either side shows)."""
PARTITION_NULL = {"column_mapping_name", "column_mapping_reader_v2", "column_mapping_id"}
"""Shapes whose partition column DuckDB 1.5.5 reads as null: it does not resolve
partition values by physical name, as PROTOCOL.md "Column Mapping" requires (delta-rs
does); the other columns are compared."""


def _normal(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        out.append({k: _value(v) for k, v in r.items()})
    return by_key(out, "id")


def _value(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC)
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, Decimal):
        return v.normalize()
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    return v


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_reads_the_same_in_ours_delta_rs_and_duckdb(tmp_path, shape):
    loc = str(tmp_path / shape)
    SHAPES[shape](loc)
    ours = _normal(DeltaTable.load(loc).to_arrow().to_pylist())
    assert len(ours) == EXPECTED_ROWS[shape]
    for name, reader in (("delta-rs", delta_rs_query_rows), ("duckdb", duckdb_delta_rows)):
        if (shape, name) in READERS_DIFFER:
            with pytest.raises(Exception):  # noqa: B017 - the reader's own error types
                reader(loc)
            continue
        theirs = _normal(reader(loc))
        if name == "duckdb" and shape in PARTITION_NULL:
            assert {r["p"] for r in theirs} == {None}
            theirs = [dict(r, p=o["p"]) for r, o in zip(theirs, ours, strict=True)]
        assert theirs == ours, name


@pytest.mark.interop
@pytest.mark.timeout(1800)  # one JVM start
def test_every_shape_reads_the_same_in_delta_lake_on_spark(tmp_path):
    """Delta Lake on Spark, the protocol's reference implementation, reads every shape,
    and the table delta-rs wrote (deletion vectors, column mapping) that ours then
    appended to and upserted into, as ours does, but for the shapes SPARK_DIFFERS names
    (their reading is asserted there); one JVM reads them all."""
    locations = {}
    for shape, build in SHAPES.items():
        locations[shape] = str(tmp_path / shape)
        build(locations[shape])
    locations["written_into"] = str(tmp_path / "written_into")
    delta_rs_table_with_dvs_and_mapping(locations["written_into"])
    append_and_upsert_into(locations["written_into"])
    got = read_with_delta(list(locations.values()))
    for (shape, loc), theirs in zip(locations.items(), got, strict=True):
        ours = _normal(DeltaTable.load(loc).to_arrow().to_pylist())
        if shape in SPARK_DIFFERS:
            ids = sorted(r["id"] for r in theirs.to_pylist())
            assert ids == SPARK_DIFFERS[shape][1], shape
            continue
        assert _normal(theirs.to_pylist()) == ours, shape


# --- broken tables -----------------------------------------------------------------------


def _dv_table(loc: str, descriptor: dict[str, Any]) -> None:
    commit(
        loc,
        0,
        protocol(3, 7, "deletionVectors"),
        metadata(ID_V),
        data_file(loc, "a.parquet", _ids(10), deletion_vector=descriptor),
    )


def _corrupt_crc(loc: str) -> None:
    (dv,) = dv_file(loc, [[1, 2]])
    _dv_table(loc, dv)
    (name,) = [n for n in os.listdir(loc) if n.startswith("deletion_vector_")]
    with open(f"{loc}/{name}", "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))


def _wrong_cardinality(loc: str) -> None:
    _dv_table(loc, dict(inline_dv([1, 2]), cardinality=3))


def _wrong_size(loc: str) -> None:
    (dv,) = dv_file(loc, [[1, 2]])
    _dv_table(loc, dict(dv, sizeInBytes=dv["sizeInBytes"] + 4))


def _missing_dv_file(loc: str) -> None:
    (dv,) = dv_file(loc, [[1]])
    _dv_table(loc, dv)
    for n in os.listdir(loc):
        if n.startswith("deletion_vector_"):
            os.remove(f"{loc}/{n}")


def _variant(loc: str) -> None:
    schema = struct_type(field("id", "long"), field("v", "variant"))
    commit(loc, 0, protocol(3, 7, "variantType"), metadata(schema))


def _void(loc: str) -> None:
    schema = struct_type(field("id", "long"), field("s", struct_type(field("nothing", "void"))))
    commit(loc, 0, protocol(1, 2), metadata(schema))


def _narrowing(loc: str) -> None:
    changes = {"delta.typeChanges": [{"fromType": "long", "toType": "integer"}]}
    schema = struct_type(field("id", "integer", metadata=changes))
    commit(loc, 0, protocol(3, 7, "typeWidening"), metadata(schema))


def _placeholder_only(loc: str) -> None:
    placeholder = metadata(ID_V)
    del placeholder["metaData"]["schemaString"]
    commit(loc, 0, protocol(1, 2), placeholder)


def _missing_sidecar(loc: str) -> None:
    v2_checkpoint_json(loc)
    shutil.rmtree(f"{loc}/_delta_log/_sidecars")


def _unknown_mapping_mode(loc: str) -> None:
    config = {"delta.columnMapping.mode": "position"}
    commit(loc, 0, protocol(3, 7, "columnMapping"), metadata(ID_V, config))
    commit(loc, 1, data_file(loc, "a.parquet", _ids(1)))


BROKEN: dict[str, tuple[Callable[[str], None], type[Exception], str]] = {
    "dv_crc": (_corrupt_crc, CorruptionError, "CRC-32 does not match"),
    "dv_cardinality": (_wrong_cardinality, CorruptionError, "holds 2 rows.*says 3"),
    "dv_size": (_wrong_size, CorruptionError, "too short for a deletion vector of"),
    "dv_missing": (_missing_dv_file, MissingFileError, "deletion_vector_"),
    "variant": (_variant, UnsupportedError, "variantType"),
    "void": (
        _void,
        UnsupportedError,
        r"column 's.nothing' has type void \(Delta\), which stream_sink",
    ),
    "narrowing": (_narrowing, UnsupportedError, "long -> integer"),
    "byte_to_narrow_decimal": (
        _byte_to_narrow_decimal,
        UnsupportedError,
        "column 'b' records a type change byte -> decimal.5,2., .* not supported",
    ),
    "placeholder_only": (_placeholder_only, CorruptMetadataError, "no schemaString"),
    "missing_sidecar": (_missing_sidecar, MissingFileError, "sidecar 3a0d65cd"),
    "unknown_mapping_mode": (_unknown_mapping_mode, Exception, "'position' is not one of"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_tables_are_refused_naming_the_problem(tmp_path, case):
    build, error, message = BROKEN[case]
    loc = str(tmp_path / case)
    build(loc)
    with pytest.raises(error, match=message):
        DeltaTable.load(loc).to_arrow()


def test_stream_sink_read_reads_an_inline_vector_with_a_padded_tail(tmp_path, capsys):
    from stream_sink.cli.main import main

    loc = str(tmp_path / "t")
    inline_dv_padded_tail(loc)
    assert main(["read", loc, "--snapshot-id", "1", "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["id"] for r in rows) == [0, 2, 3, 5, 6, 8, 9, 10, 11]


def test_stream_sink_read_prints_an_evolved_table(tmp_path, capsys):
    from stream_sink.cli.main import main

    loc = str(tmp_path / "t")
    schema_evolution(loc)
    assert main(["read", loc, "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((r["id"], r["added"]) for r in rows) == [(1, None), (2, None), (3, "2024-01-02")]
