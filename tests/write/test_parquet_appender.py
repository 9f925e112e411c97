"""The Parquet appender: field ids, encoding options and the column metrics manifests carry.

Tests stream_sink.write.column_stats: column metrics from a file's footer.
Tests stream_sink.write.leaves: nested columns' leaf values."""

from __future__ import annotations

import math
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stream_sink.io import FileIO
from stream_sink.table.arrow import schema_from_arrow, schema_to_arrow
from stream_sink.table.conversions import from_bytes
from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.metrics_config import MetricsConfig
from stream_sink.table.schema import Schema
from stream_sink.write.config import WriteConfig
from stream_sink.write.parquet import FileSpec, ParquetAppender

IO = FileIO()

ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i", pa.int32()),
        ("s", pa.string()),
        ("d", pa.float64()),
        ("f", pa.float32()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(9, 2)),
        ("bin", pa.binary()),
        ("flag", pa.bool_()),
        ("fx", pa.binary(4)),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.float64())])),
        ("l", pa.list_(pa.float64())),
        ("m", pa.map_(pa.string(), pa.int64())),
    ]
)
SCHEMA = schema_from_arrow(ARROW)
NAN = float("nan")


def rows() -> pa.Table:
    data = {
        "id": [3, -7, 12, 0],
        "i": [None, -2, 5, 1],
        "s": ["pear", "apple", None, "ünïcode-and-a-long-tail-value"],
        "d": [1.5, NAN, -3.25, None],
        "f": [NAN, NAN, 2.5, -1.0],
        "day": [date(1969, 7, 20), date(2024, 2, 29), None, date(1970, 1, 1)],
        "ts": [
            datetime(1960, 1, 1, 12),
            None,
            datetime(2030, 5, 6, 7, 8, 9, 10),
            datetime(1970, 1, 1),
        ],
        "tz": [datetime(2020, 1, 1, tzinfo=timezone.utc)] * 2
        + [None, datetime(1950, 3, 3, tzinfo=timezone.utc)],
        "dec": [Decimal("-12.50"), Decimal("0.01"), Decimal("99.99"), None],
        "bin": [b"\x00\xff", b"\xff\xff\xff", None, b"abc"],
        "flag": [True, None, True, True],
        "fx": [b"zzzz", b"aaaa", None, b"mmmm"],
        "st": [{"x": 4, "y": NAN}, None, {"x": -9, "y": 1.0}, {"x": None, "y": 2.0}],
        "l": [[1.0, NAN], None, [], [NAN, NAN, 3.0]],
        "m": [[("a", 1)], None, [("b", 2), ("c", None)], []],
    }
    return pa.Table.from_pydict(data, schema=schema_to_arrow(SCHEMA))


def write(
    tmp_path: Path, data: pa.Table, schema: Schema = SCHEMA, props: dict[str, str] | None = None
) -> DataFile:
    props = props or {}
    spec = FileSpec(
        schema,
        WriteConfig.from_properties(props).parquet,
        MetricsConfig.from_properties(props, schema),
    )
    appender = ParquetAppender(IO, str(tmp_path / f"{uuid.uuid4()}.parquet"), spec)
    for batch in data.to_batches(max_chunksize=2):
        appender.write(pa.Table.from_batches([batch]))
    return appender.close()


def micros(dt: datetime) -> int:
    return (dt - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def fid(name: str) -> int:
    return SCHEMA.find_field(name).field_id


def bounds(f: DataFile, name: str) -> tuple[object, object]:
    t = SCHEMA.find_type(name)
    assert f.lower_bounds is not None and f.upper_bounds is not None
    lo, hi = f.lower_bounds.get(fid(name)), f.upper_bounds.get(fid(name))
    return (
        from_bytes(t, lo) if lo is not None else None,
        from_bytes(t, hi) if hi is not None else None,
    )


def test_file_carries_field_ids_and_the_rows(tmp_path: Path) -> None:
    f = write(tmp_path, rows())
    back = pq.read_table(f.file_path)
    assert repr(back.to_pylist()) == repr(rows().to_pylist())  # repr: NaN equals NaN
    assert back.schema.equals(rows().schema)
    ids = [int(field.metadata[b"PARQUET:field_id"]) for field in back.schema]
    assert ids == [field.field_id for field in SCHEMA.fields]
    assert f.record_count == 4
    assert f.file_size_in_bytes == Path(f.file_path).stat().st_size
    assert f.content == DataFileContent.DATA


def test_counts_per_column(tmp_path: Path) -> None:
    f = write(tmp_path, rows())
    assert f.value_counts is not None and f.null_value_counts is not None
    assert f.nan_value_counts is not None
    assert f.value_counts[fid("id")] == 4
    assert f.null_value_counts[fid("i")] == 1
    assert f.null_value_counts[fid("st.x")] == 2  # the null struct and the null x
    assert f.nan_value_counts == {fid("d"): 1, fid("f"): 2, fid("st.y"): 1, fid("l.element"): 3}
    assert f.value_counts[fid("l.element")] == 7  # 5 elements, the null list and the empty one
    assert set(f.column_sizes or {}) == {x.field_id for x in SCHEMA.leaf_fields()}


def test_bounds_are_exact_for_every_type(tmp_path: Path) -> None:
    f = write(tmp_path, rows(), props={"write.metadata.metrics.default": "full"})
    assert bounds(f, "id") == (-7, 12)
    assert bounds(f, "i") == (-2, 5)
    assert bounds(f, "s") == ("apple", "ünïcode-and-a-long-tail-value")
    assert bounds(f, "d") == (-3.25, 1.5)  # NaN left out
    assert bounds(f, "f") == (-1.0, 2.5)
    assert bounds(f, "day") == ((date(1969, 7, 20) - date(1970, 1, 1)).days, 19782)
    assert bounds(f, "ts") == (
        micros(datetime(1960, 1, 1, 12)),
        micros(datetime(2030, 5, 6, 7, 8, 9, 10)),
    )
    assert bounds(f, "tz") == (micros(datetime(1950, 3, 3)), micros(datetime(2020, 1, 1)))
    assert bounds(f, "dec") == (Decimal("-12.50"), Decimal("99.99"))
    assert bounds(f, "bin") == (b"\x00\xff", b"\xff\xff\xff")
    assert bounds(f, "flag") == (True, True)
    assert bounds(f, "fx") == (b"aaaa", b"zzzz")
    assert bounds(f, "st.x") == (-9, 4)
    assert bounds(f, "st.y") == (1.0, 2.0)


def test_no_bounds_inside_lists_and_maps(tmp_path: Path) -> None:
    f = write(tmp_path, rows(), props={"write.metadata.metrics.default": "full"})
    assert f.lower_bounds is not None
    for name in ("l.element", "m.key", "m.value"):
        assert fid(name) not in f.lower_bounds
        assert fid(name) not in (f.upper_bounds or {})


def test_default_truncates_strings_and_binary(tmp_path: Path) -> None:
    f = write(tmp_path, rows(), props={"write.metadata.metrics.column.bin": "truncate(2)"})
    lo, hi = bounds(f, "s")
    assert lo == "apple"
    assert hi == "ünïcode-and-a-lp"  # 16 code points, the last one incremented
    assert bounds(f, "bin") == (b"\x00\xff", None)  # 0xFF 0xFF cannot be incremented


def test_metrics_modes_none_and_counts(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        rows(),
        props={
            "write.metadata.metrics.default": "none",
            "write.metadata.metrics.column.id": "counts",
            "write.metadata.metrics.column.d": "full",
        },
    )
    assert set(f.value_counts or {}) == {fid("id"), fid("d")}
    assert set(f.lower_bounds or {}) == {fid("d")}
    assert f.nan_value_counts == {fid("d"): 1}


def test_all_nan_column_has_counts_but_no_bounds(tmp_path: Path) -> None:
    schema = schema_from_arrow(pa.schema([("v", pa.float64())]))
    f = write(tmp_path, pa.table({"v": [NAN, NAN, None]}, schema=schema_to_arrow(schema)), schema)
    assert f.nan_value_counts == {1: 2}
    assert f.null_value_counts == {1: 1}
    assert f.lower_bounds == {} and f.upper_bounds == {}


def test_strings_beyond_the_statistics_limit_get_bounds_from_the_data(tmp_path: Path) -> None:
    schema = schema_from_arrow(pa.schema([("s", pa.string()), ("b", pa.binary())]))
    long_a, long_z = "a" * 10_000 + "x", "z" * 9_000
    data = pa.table(
        {"s": ["m", long_z, None, long_a], "b": [b"\x05" * 5000, b"\x01", None, b"\x09"]},
        schema=schema_to_arrow(schema),
    )
    f = write(tmp_path, data, schema, {"write.metadata.metrics.column.b": "full"})
    footer = pq.read_metadata(f.file_path).row_group(0).column(0).statistics
    assert not footer.has_min_max  # what makes the fallback necessary
    assert f.lower_bounds is not None and f.upper_bounds is not None
    assert from_bytes(schema.find_type("s"), f.lower_bounds[1]) == "a" * 16
    assert from_bytes(schema.find_type("s"), f.upper_bounds[1]) == "z" * 15 + "{"
    assert f.lower_bounds[2] == b"\x01" and f.upper_bounds[2] == b"\x09"


def test_split_offsets_are_row_group_starts(tmp_path: Path) -> None:
    data = pa.table({"id": pa.array(range(50_000), pa.int64())})
    schema = schema_from_arrow(data.schema)
    f = write(
        tmp_path,
        data.cast(schema_to_arrow(schema)),
        schema,
        {"write.parquet.row-group-size-bytes": "100000"},
    )
    md = pq.read_metadata(f.file_path)
    assert md.num_row_groups >= 3
    starts = []
    for r in range(md.num_row_groups):
        c = md.row_group(r).column(0)
        starts.append(c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset)
    assert f.split_offsets == tuple(starts)
    assert sum(md.row_group(r).num_rows for r in range(md.num_row_groups)) == 50_000


def test_codec_and_level_come_from_properties(tmp_path: Path) -> None:
    data = rows()
    default = pq.read_metadata(write(tmp_path, data).file_path)
    assert default.row_group(0).column(0).compression == "ZSTD"
    snappy = pq.read_metadata(
        write(tmp_path, data, props={"write.parquet.compression-codec": "snappy"}).file_path
    )
    assert snappy.row_group(0).column(0).compression == "SNAPPY"
    none = pq.read_metadata(
        write(tmp_path, data, props={"write.parquet.compression-codec": "uncompressed"}).file_path
    )
    assert none.row_group(0).column(0).compression == "UNCOMPRESSED"
    leveled = write(tmp_path, data, props={"write.parquet.compression-level": "9"})
    assert repr(pq.read_table(leveled.file_path).to_pylist()) == repr(data.to_pylist())


def test_abort_deletes_the_file(tmp_path: Path) -> None:
    spec = FileSpec(SCHEMA, WriteConfig().parquet, MetricsConfig())
    appender = ParquetAppender(IO, str(tmp_path / "x.parquet"), spec)
    appender.write(rows())
    appender.flush()
    assert (tmp_path / "x.parquet").exists()
    appender.abort()
    appender.abort()
    assert not (tmp_path / "x.parquet").exists()


def test_metrics_agree_with_pyiceberg(tmp_path: Path) -> None:
    """pyiceberg's own statistics for the same file (it keeps no bounds for nested
    fields and counts no NaNs, so those are left out of the comparison)."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.schema import Schema as PyIcebergSchema

    f = write(tmp_path, rows())
    theirs_schema = PyIcebergSchema.model_validate(SCHEMA.to_json())
    stats = data_file_statistics_from_parquet_metadata(
        pq.read_metadata(f.file_path),
        compute_statistics_plan(theirs_schema, {}),
        parquet_path_to_id_mapping(theirs_schema),
    )
    theirs = stats.to_serialized_dict()
    assert f.column_sizes == theirs["column_sizes"]
    assert f.value_counts == theirs["value_counts"]
    assert f.null_value_counts == theirs["null_value_counts"]
    top = {x.field_id for x in SCHEMA.fields}
    for ours, their in (
        (f.lower_bounds, theirs["lower_bounds"]),
        (f.upper_bounds, theirs["upper_bounds"]),
    ):
        assert ours is not None
        assert {k: v for k, v in ours.items() if k in top} == their
    assert list(f.split_offsets or ()) == theirs["split_offsets"]


def test_negative_zero_and_infinity_bounds(tmp_path: Path) -> None:
    schema = schema_from_arrow(pa.schema([("v", pa.float64())]))
    data = pa.table({"v": [0.0, -0.0, math.inf, NAN]}, schema=schema_to_arrow(schema))
    f = write(tmp_path, data, schema)
    assert f.lower_bounds is not None and f.upper_bounds is not None
    lo = from_bytes(schema.find_type("v"), f.lower_bounds[1])
    hi = from_bytes(schema.find_type("v"), f.upper_bounds[1])
    assert lo == 0.0 and math.copysign(1.0, lo) == -1.0
    assert hi == math.inf


@pytest.mark.parametrize("rows_per_batch", [1, 3, 1000])
def test_batches_of_any_size_give_the_same_metrics(tmp_path: Path, rows_per_batch: int) -> None:
    spec = FileSpec(SCHEMA, WriteConfig().parquet, MetricsConfig())
    appender = ParquetAppender(IO, str(tmp_path / f"{rows_per_batch}.parquet"), spec)
    for batch in rows().to_batches(max_chunksize=rows_per_batch):
        appender.write(pa.Table.from_batches([batch]))
    f = appender.close()
    whole = write(tmp_path, rows())
    for name in (
        "value_counts",
        "null_value_counts",
        "nan_value_counts",
        "lower_bounds",
        "upper_bounds",
    ):
        assert getattr(f, name) == getattr(whole, name), name
