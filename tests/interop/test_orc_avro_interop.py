"""Tables Apache Iceberg Java wrote with ORC and Avro data files
(``write.format.default``), partitioned, with a row-level DELETE that Java writes as
position delete files of the same format (merge-on-read, format version 2): ours reads
the table before and after the delete as Java reads it. One Spark session writes and
reads them all."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.table.manifest import DataFileContent, read_manifest, snapshot_manifests

pytestmark = [pytest.mark.interop, pytest.mark.slow]

FORMATS = ("orc", "avro")
COLUMNS = (
    "id bigint, s string, n int, f float, d double, ok boolean, day date, "
    "ts timestamp, ntz timestamp_ntz, amount decimal(9, 2), big decimal(38, 10), "
    "b binary, st struct<a: int, b: string>, l array<bigint>, m map<string, int>, "
    "km map<int, string>, p string"
)
VALUES = [
    "(1, 'a', 10, 1.5, 2.25, true, DATE'2024-01-02', TIMESTAMP'2024-01-02 03:04:05.000006', "
    "TIMESTAMP_NTZ'2024-01-02 03:04:05.000006', 1.25, 12345678901234567890.0123456789, "
    "X'0001', named_struct('a', 1, 'b', 'x'), array(1, 2), map('k', 1), map(1, 'v'), 'east')",
    "(2, null, null, null, null, null, null, null, null, null, null, null, null, null, null, "
    "null, 'east')",
    "(3, 'c', -3, -1.0, -2.0, false, DATE'1969-12-31', TIMESTAMP'1969-12-31 23:59:59.999999', "
    "TIMESTAMP_NTZ'1969-12-31 23:59:59.999999', -3.50, -1.5, X'', named_struct('a', null, "
    "'b', null), array(), map(), map(), 'west')",
    "(4, 'd', 4, 4.0, 4.0, true, DATE'2024-03-04', TIMESTAMP'2024-03-04 00:00:00', "
    "TIMESTAMP_NTZ'2024-03-04 00:00:00', 0.01, 0, X'ff', named_struct('a', 4, 'b', 'y'), "
    "array(null, 4), map('k', null), map(4, null), 'west')",
]


def statements(fmt: str) -> list[str]:
    name = f"hc.db.t_{fmt}"
    return [
        f"CREATE TABLE {name} ({COLUMNS}) USING iceberg PARTITIONED BY (p) TBLPROPERTIES ("
        f"'format-version'='2', 'write.format.default'='{fmt}', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
        f"INSERT INTO {name} VALUES {', '.join(VALUES[:2])}",
        f"INSERT INTO {name} VALUES {', '.join(VALUES[2:])}",
        f"ALTER TABLE {name} CREATE TAG before_delete",
        f"DELETE FROM {name} WHERE id IN (2, 3)",
        f"SELECT * FROM {name}",
        f"SELECT * FROM {name} VERSION AS OF 'before_delete'",
    ]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, java_sql: Any) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("orc-avro") / "wh"
    results = java_sql(str(root), [s for fmt in FORMATS for s in statements(fmt)])
    per = len(statements(FORMATS[0]))
    java = {fmt: results[i * per + per - 2 : i * per + per] for i, fmt in enumerate(FORMATS)}
    return root, java


def normal(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in one form for both readers: maps as sorted pairs, floats rounded."""
    return sorted((_row(r) for r in rows), key=lambda r: r["id"])


def _row(r: dict[str, Any]) -> dict[str, Any]:
    return {k: _value(v) for k, v in r.items()}


def _value(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and isinstance(v[0], tuple):  # a map read as pairs
            return sorted((k, _value(x)) for k, x in v)
        return [_value(x) for x in v]
    if isinstance(v, float):
        return round(v, 5)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc)
    if isinstance(v, Decimal):
        return v.normalize()
    return v


@pytest.mark.parametrize("fmt", FORMATS)
def test_java_written_files_of_each_format_read_the_same(
    written: tuple[Path, dict], fmt: str
) -> None:
    root, java = written
    table = ss.load_catalog("hc", type="hadoop", warehouse=str(root)).load_table(f"db.t_{fmt}")
    formats = set()
    for m in snapshot_manifests(table.io, table.current_snapshot()):
        spec = table.metadata.spec_by_id(m.partition_spec_id)
        for e in read_manifest(table.io, m, spec.partition_type(table.schema())):
            formats.add((DataFileContent(e.data_file.content).name, e.data_file.file_format.value))
    assert formats == {("DATA", fmt.upper()), ("POSITION_DELETES", fmt.upper())}
    current, before_delete = java[fmt]
    ours = table.scan().to_arrow()
    assert [r["id"] for r in normal(ours.to_pylist())] == [1, 4]
    assert normal(ours.to_pylist()) == normal(current.to_pylist())
    earlier = table.scan(ref="before_delete").to_arrow()
    assert normal(earlier.to_pylist()) == normal(before_delete.to_pylist())
    assert len(earlier) == 4
    assert table.scan(row_filter="p = 'west'").count() == 1
    assert pa.types.is_timestamp(ours.schema.field("ntz").type)
