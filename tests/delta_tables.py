"""Delta tables built by hand from PROTOCOL.md, for shapes no writer installed here
produces: delta-rs (``deltalake`` 1.x) writes neither deletion vectors (its DELETE
rewrites files), nor column mapping (it records the mode but writes display names and no
``columnMapping`` feature), nor V2 checkpoints, nor widened types. Every table built
here is read by delta-rs and DuckDB too, so a mistake in building it shows as a
disagreement rather than as a passing test.

The deletion vectors are serialized with pyroaring (CRoaring's portable format), not
with the code under test.
"""

from __future__ import annotations

import json
import os
import struct
import uuid
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyroaring

from stream_sink.delta import DeltaTable
from stream_sink.delta.deletion_vectors import z85_encode
from stream_sink.delta.merge import copy_on_write

DV_MAGIC = 1681511377
Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)


def field(
    name: str,
    type_: Any,
    *,
    id: int | None = None,
    physical: str | None = None,
    nullable: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Delta struct field (with column mapping metadata when ``id``/``physical``)."""
    meta: dict[str, Any] = dict(metadata or {})
    if id is not None:
        meta["delta.columnMapping.id"] = id
    if physical is not None:
        meta["delta.columnMapping.physicalName"] = physical
    return {"name": name, "type": type_, "nullable": nullable, "metadata": meta}


def struct_type(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


def protocol(reader: int, writer: int, *features: str, writer_only: Sequence[str] = ()) -> dict:
    body: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader == 3:
        body["readerFeatures"] = list(features)
    if writer == 7:
        body["writerFeatures"] = [*features, *writer_only]
    return {"protocol": body}


def metadata(
    schema: dict[str, Any],
    configuration: Mapping[str, str] | None = None,
    partition_columns: Sequence[str] = (),
) -> dict:
    return {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": list(partition_columns),
            "configuration": dict(configuration or {}),
            "createdTime": 1700000000000,
        }
    }


def commit(location: str, version: int, *actions: dict[str, Any]) -> None:
    os.makedirs(f"{location}/_delta_log", exist_ok=True)
    info = {"commitInfo": {"timestamp": 1700000000000 + version, "operation": "WRITE"}}
    with open(f"{location}/_delta_log/{version:020d}.json", "w") as f:
        f.writelines(json.dumps(a) + "\n" for a in [info, *actions])


def data_file(
    location: str,
    rel: str,
    table: pa.Table,
    *,
    partition_values: Mapping[str, str | None] | None = None,
    deletion_vector: Mapping[str, Any] | None = None,
    **write_options: Any,
) -> dict[str, Any]:
    """Write ``table`` (already in physical names) and return its ``add`` action."""
    path = f"{location}/{rel}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, **write_options)
    body: dict[str, Any] = {
        "path": rel,
        "partitionValues": dict(partition_values or {}),
        "size": os.path.getsize(path),
        "modificationTime": 1700000000000,
        "dataChange": True,
        "stats": json.dumps({"numRecords": table.num_rows}),
    }
    if deletion_vector is not None:
        body["deletionVector"] = dict(deletion_vector)
    return {"add": body}


def bitmap_array(rows: Sequence[int]) -> bytes:
    """Delta's RoaringBitmapArray of ``rows`` (all below 2**32), through pyroaring."""
    bm = pyroaring.BitMap(rows)
    buckets = 1 if rows else 0
    body = struct.pack("<I", 0) + bm.serialize() if rows else b""
    return struct.pack("<i", DV_MAGIC) + struct.pack("<q", buckets) + body


def dv_file(
    location: str, vectors: Sequence[Sequence[int]], *, prefix: str = ""
) -> list[dict[str, Any]]:
    """One deletion vector file holding ``vectors``; their ``u`` descriptors (offsets)."""
    file_id = uuid.uuid4()
    payload = bytearray([1])
    out = []
    for rows in vectors:
        data = bitmap_array(rows)
        offset = len(payload)
        payload += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
        out.append(
            {
                "storageType": "u",
                "pathOrInlineDv": prefix + z85_encode(file_id.bytes),
                "offset": offset,
                "sizeInBytes": len(data),
                "cardinality": len(set(rows)),
            }
        )
    folder = f"{location}/{prefix}" if prefix else location
    os.makedirs(folder, exist_ok=True)
    with open(f"{folder}/deletion_vector_{file_id}.bin", "wb") as f:
        f.write(payload)
    return out


def inline_dv(rows: Sequence[int], *, padded_tail: bool = False) -> dict[str, Any]:
    """An inline descriptor of ``rows``. ``padded_tail``: Z85 as the Rust ``z85`` crate
    (delta-rs, delta-kernel-rs) encodes bytes that are not a multiple of 4: the last
    group holds the tail's bytes as a right-aligned number, with a ``#`` in place of each
    leading digit for a missing byte (Delta's Java encoder pads with zero bytes instead)."""
    data = bitmap_array(rows)
    text = z85_encode(data)
    tail = len(data) % 4
    if padded_tail:
        assert tail, "the bitmap is a multiple of 4 bytes: there is no tail to pad"
        value = int.from_bytes(data[len(data) - tail :], "big")
        digits = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            digits.append(Z85_ALPHABET[digit])
        group = "".join(reversed(digits))
        text = text[:-5] + "#" * (4 - tail) + group[4 - tail :]
    return {
        "storageType": "i",
        "pathOrInlineDv": text,
        "sizeInBytes": len(data),
        "cardinality": len(set(rows)),
    }


def with_field_ids(table: pa.Table, ids: Mapping[str, int]) -> pa.Table:
    """``table`` with Parquet field ids on its top-level columns."""
    fields = [
        f.with_metadata({"PARQUET:field_id": str(ids[f.name])}) if f.name in ids else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


_KV = pa.map_(pa.string(), pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
CHECKPOINT_COLUMNS = {
    "checkpointMetadata": pa.struct([("version", pa.int64()), ("tags", _KV)]),
    "protocol": pa.struct(
        [
            ("minReaderVersion", pa.int32()),
            ("minWriterVersion", pa.int32()),
            ("readerFeatures", pa.list_(pa.string())),
            ("writerFeatures", pa.list_(pa.string())),
        ]
    ),
    "metaData": pa.struct(
        [
            ("id", pa.string()),
            ("name", pa.string()),
            ("description", pa.string()),
            ("format", pa.struct([("provider", pa.string()), ("options", _KV)])),
            ("schemaString", pa.string()),
            ("partitionColumns", pa.list_(pa.string())),
            ("configuration", _KV),
            ("createdTime", pa.int64()),
        ]
    ),
    "txn": pa.struct(
        [("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())]
    ),
    "add": pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", _KV),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("stats", pa.string()),
            ("tags", _KV),
            ("deletionVector", _DV),
        ]
    ),
    "remove": pa.struct(
        [
            ("path", pa.string()),
            ("deletionTimestamp", pa.int64()),
            ("dataChange", pa.bool_()),
            ("deletionVector", _DV),
        ]
    ),
    "domainMetadata": pa.struct(
        [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
    ),
    "sidecar": pa.struct(
        [
            ("path", pa.string()),
            ("sizeInBytes", pa.int64()),
            ("modificationTime", pa.int64()),
            ("tags", _KV),
        ]
    ),
}
"""Checkpoint columns as PROTOCOL.md "Checkpoint Schema" gives them."""


def action_parquet(path: str, actions: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """``actions`` as a checkpoint (or sidecar) Parquet file with ``columns``."""
    rows = []
    for action in actions:
        ((name, body),) = action.items()
        body = dict(body)
        for key in ("partitionValues", "configuration", "tags", "options"):
            if isinstance(body.get(key), dict):
                body[key] = list(body[key].items())
        if isinstance(body.get("format"), dict):
            body["format"] = {"provider": "parquet", "options": []}
        rows.append({c: body if c == name else None for c in columns})
    schema = pa.schema([pa.field(c, CHECKPOINT_COLUMNS[c]) for c in columns])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def delta_rs_table_with_dvs_and_mapping(loc: str) -> None:
    """A table delta-rs writes (two files of 100 rows, ids 0-99 and 100-199, deletion
    vectors enabled), then upgraded by hand as Delta does it: column mapping turned on
    (``name``; existing columns keep their names as physical names), ``v`` renamed to
    ``value``, and a deletion vector deleting ids 2 and 5 from the first file (delta-rs
    writes no deletion vectors)."""
    from deltalake import DeltaTable as RsTable
    from deltalake import write_deltalake

    first = pa.table({"id": pa.array(range(100), pa.int64()), "v": [f"a{i}" for i in range(100)]})
    second = pa.table({"id": pa.array(range(100, 200), pa.int64()), "v": ["b"] * 100})
    write_deltalake(loc, first, configuration={"delta.enableDeletionVectors": "true"})
    write_deltalake(loc, second, mode="append")
    rs = RsTable(loc)
    proto = rs.protocol()
    readers = [*(proto.reader_features or ()), "columnMapping"]
    writers = [*(proto.writer_features or ()), "columnMapping"]
    schema = struct_type(
        field("id", "long", id=1, physical="id"), field("value", "string", id=2, physical="v")
    )
    config = {
        **rs.metadata().configuration,
        "delta.columnMapping.mode": "name",
        "delta.columnMapping.maxColumnId": "2",
    }
    upgrade = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": readers,
            "writerFeatures": writers,
        }
    }
    meta = metadata(schema, config)
    meta["metaData"]["id"] = rs.metadata().id
    commit(loc, 2, upgrade, meta)
    with open(f"{loc}/_delta_log/{0:020d}.json") as f:
        (add,) = [json.loads(line)["add"] for line in f if '"add"' in line]
    (dv,) = dv_file(loc, [[2, 5]])
    remove = {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}
    commit(loc, 3, {"remove": remove}, {"add": dict(add, deletionVector=dv)})


def upsert_into(table: DeltaTable, rows: pa.Table) -> int:
    """One copy-on-write MERGE of ``rows`` by ``id`` (the writer the upsert sink uses);
    the version it committed."""
    batch = copy_on_write(table.snapshot, table.io, rows, ["id"], "upsert")
    txn = table.new_transaction().add_all(batch.adds).add_all(batch.removes)
    txn.read_files(r.path for r in batch.removes)
    return txn.commit("MERGE")


def append_and_upsert_into(loc: str) -> None:
    """Ours writing into the table :func:`delta_rs_table_with_dvs_and_mapping` made: an
    append of ids 200-201, then an upsert of ids 2 (deleted by its vector), 3 and 4 (in
    the first file), 150 (in the second) and 300 (new)."""
    table = DeltaTable.load(loc)
    table.append(pa.table({"id": pa.array([200, 201], pa.int64()), "value": ["n", "n"]}))
    upsert = pa.table(
        {
            "id": pa.array([2, 3, 4, 150, 300], pa.int64()),
            "value": ["u2", "u3", "u4", "u150", "u300"],
        }
    )
    upsert_into(table, upsert)
