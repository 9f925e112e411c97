"""Per-file statistics (PROTOCOL.md "Per-file Statistics") as the ``stats`` JSON string.

``numRecords``, and for each top-level primitive data column ``nullCount`` and, where
the column has a non-null, non-NaN value, ``minValues``/``maxValues``. Invariant: the
recorded range always contains every value of the file, so data skipping is safe:
timestamps are stored in milliseconds (as Spark's Delta writer does), the minimum
rounded down and the maximum rounded up.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def json_value(value: Any, type_: pa.DataType, upper: bool) -> Any:
    if isinstance(value, dt.datetime):
        floor = value.replace(microsecond=value.microsecond // 1000 * 1000)
        if upper and floor != value:
            floor += dt.timedelta(milliseconds=1)
        if floor.tzinfo is not None:
            return floor.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return floor.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value) if not value.is_finite() else json.loads(str(value))
    return value


def _stat_columns(table: pa.Table) -> list[str]:
    out = []
    for f in table.schema:
        t = f.type
        if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            continue
        if pa.types.is_boolean(t):
            continue
        out.append(f.name)
    return out


def file_stats(table: pa.Table) -> str:
    """The stats JSON of a data file holding exactly ``table``'s rows."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    with_bounds = set(_stat_columns(table))
    for f in table.schema:
        col = table.column(f.name)
        nulls[f.name] = col.null_count
        if f.name not in with_bounds or col.null_count == len(col):
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None or (isinstance(lo, float) and (math.isnan(lo) or math.isnan(hi))):
            continue
        mins[f.name] = json_value(lo, f.type, upper=False)
        maxs[f.name] = json_value(hi, f.type, upper=True)
    doc = {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return json.dumps(doc, separators=(",", ":"))


def parse_stats(stats: str | None) -> dict[str, Any] | None:
    if not stats:
        return None
    try:
        doc = json.loads(stats)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def num_records(stats: str | None) -> int | None:
    doc = parse_stats(stats)
    n = None if doc is None else doc.get("numRecords")
    return n if isinstance(n, int) else None


def may_contain(stats: str | None, column: str, lo: Any, hi: Any) -> bool:
    """False only when the file's stats prove no value of ``column`` lies in [lo, hi]
    (both JSON-comparable: numbers or strings)."""
    doc = parse_stats(stats)
    if doc is None:
        return True
    fmin = (doc.get("minValues") or {}).get(column)
    fmax = (doc.get("maxValues") or {}).get(column)
    if fmin is None or fmax is None:
        return True
    lo, hi, fmin, fmax = (_comparable(v) for v in (lo, hi, fmin, fmax))
    try:
        return not (hi < fmin or lo > fmax)
    except TypeError:
        return True


_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def _comparable(value: Any) -> Any:
    """Timestamps as writers spell them (``2024-01-01 00:00:00.000``, ``...T...Z``) in one
    spelling, so they compare as instants of the same zone would."""
    if isinstance(value, str) and _TIMESTAMP.match(value):
        return value.replace(" ", "T", 1).rstrip("Z")
    return value


def with_loose_bounds(stats: str | None) -> str | None:
    """``stats`` of a file that now has a deletion vector: ``numRecords`` still counts
    every physical row (as the protocol requires), the bounds stay valid but are no
    longer tight (``tightBounds: false``)."""
    doc = parse_stats(stats)
    if doc is None:
        return stats
    doc["tightBounds"] = False
    return json.dumps(doc, separators=(",", ":"))
