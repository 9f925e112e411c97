"""``table.upsert``: one row-delta snapshot through the sink's CDC writers; later rows
of a key win, within one call and across calls; DuckDB reads the same rows."""

from __future__ import annotations

import pyarrow as pa
import pytest
from readers import duckdb_rows

from stream_sink.exceptions import ValidationError
from stream_sink.table.catalog import Catalog
from stream_sink.tables import IcebergTable

ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("v", pa.string()),
        pa.field("region", pa.string(), nullable=False),
    ]
)


def data(*rows: tuple[int, str, str]) -> pa.Table:
    return pa.table(
        {"id": [r[0] for r in rows], "v": [r[1] for r in rows], "region": [r[2] for r in rows]},
        schema=ARROW,
    )


def read(t: IcebergTable) -> list[tuple[int, str, str]]:
    got = t.refresh().scan().to_arrow()
    out = sorted(
        zip(got["id"].to_pylist(), got["v"].to_pylist(), got["region"].to_pylist(), strict=True)
    )
    duck = sorted((r["id"], r["v"], r["region"]) for r in duckdb_rows(t.metadata_location))
    assert duck == out
    return out


def test_upsert_replaces_rows_by_identifier_fields_in_one_row_delta(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", ARROW, identifier_fields=["id"])
    t.append(data((1, "a", "eu"), (2, "b", "eu")))
    snap = t.upsert(data((2, "B", "eu"), (3, "c", "us"), (3, "C", "us")))
    assert snap.operation == "overwrite"
    assert len(t.snapshots()) == 2
    assert read(t) == [(1, "a", "eu"), (2, "B", "eu"), (3, "C", "us")]
    t.upsert(data((1, "A", "eu")))
    assert read(t) == [(1, "A", "eu"), (2, "B", "eu"), (3, "C", "us")]


def test_upsert_with_explicit_keys_on_a_partitioned_table(catalog: Catalog) -> None:
    t = catalog.create_table("db.p", ARROW, [("identity", "region")])
    t.upsert(data((1, "a", "eu"), (1, "x", "us")), equality_fields=["id", "region"])
    t.upsert(data((1, "b", "eu")), equality_fields=["id", "region"])
    assert read(t) == [(1, "b", "eu"), (1, "x", "us")]
    with pytest.raises(ValidationError, match="region"):
        t.upsert(data((1, "c", "eu")), equality_fields=["id"])  # partition column not a key


def test_upsert_without_keys_is_refused(catalog: Catalog) -> None:
    t = catalog.create_table("db.k", ARROW)
    with pytest.raises(ValidationError, match="key columns"):
        t.upsert(data((1, "a", "eu")))
    assert t.refresh().current_snapshot() is None
