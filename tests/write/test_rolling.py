"""Rolling data files at the target size (Iceberg's TestIcebergStreamWriter rolling case)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stream_sink.io import FileIO
from stream_sink.table.arrow import schema_from_arrow, schema_to_arrow
from stream_sink.table.metrics_config import MetricsConfig
from stream_sink.table.partitioning import UNPARTITIONED_SPEC
from stream_sink.write.config import WriteConfig
from stream_sink.write.file_factory import OutputFileFactory
from stream_sink.write.parquet import FileSpec
from stream_sink.write.rolling import RollingFileWriter

SCHEMA = schema_from_arrow(
    pa.schema([pa.field("id", pa.int64(), nullable=False), ("data", pa.string())])
)


def batch(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": range(start, start + n),
            "data": [f"row-{i:08d}-payload" for i in range(start, start + n)],
        },
        schema=schema_to_arrow(SCHEMA),
    )


def writer(tmp_path: Path, target: int, check_rows: int = 1000) -> RollingFileWriter:
    files = OutputFileFactory(str(tmp_path / "data"), UNPARTITIONED_SPEC, 1, 2)
    spec = FileSpec(SCHEMA, WriteConfig().parquet, MetricsConfig())
    return RollingFileWriter(FileIO(), files, spec, target, check_rows=check_rows)


def test_tiny_target_size_rolls_into_several_files(tmp_path: Path) -> None:
    w = writer(tmp_path, target=4 * 1024)
    for start in range(0, 20_000, 2_500):
        w.write(batch(start, 2_500))
    files = w.complete()
    assert len(files) >= 5
    assert sum(f.record_count for f in files) == 20_000
    ids: list[int] = []
    for f in files:
        table = pq.read_table(f.file_path)
        assert table.num_rows == f.record_count
        assert f.record_count % 1000 == 0 or f is files[-1]  # rolled only at check points
        ids.extend(table.column("id").to_pylist())
    assert ids == list(range(20_000))


def test_large_target_keeps_one_file(tmp_path: Path) -> None:
    w = writer(tmp_path, target=512 * 1024 * 1024)
    for start in range(0, 10_000, 1_000):
        w.write(batch(start, 1_000))
    files = w.complete()
    assert [f.record_count for f in files] == [10_000]


@pytest.mark.parametrize("check_rows", [1, 7, 1000])
def test_segments_say_where_every_row_landed(tmp_path: Path, check_rows: int) -> None:
    w = writer(tmp_path, target=2 * 1024, check_rows=check_rows)
    inputs = [batch(0, 3_000), batch(3_000, 1), batch(3_001, 4_999)]
    landed: list[tuple[int, str, int]] = []  # (id, file, position)
    for data in inputs:
        segments = w.write(data)
        assert [s.offset_in_input for s in segments] == [
            sum(s.length for s in segments[:i]) for i in range(len(segments))
        ]
        assert sum(s.length for s in segments) == data.num_rows
        ids = data.column("id").to_pylist()
        for s in segments:
            for k in range(s.length):
                landed.append((ids[s.offset_in_input + k], s.file_path, s.first_position + k))
    files = w.complete()
    assert len(files) > 1
    contents = {f.file_path: pq.read_table(f.file_path).column("id").to_pylist() for f in files}
    assert all(contents[path][pos] == row_id for row_id, path, pos in landed)
    assert len(landed) == 8_000


def test_abort_deletes_finished_and_open_files(tmp_path: Path) -> None:
    w = writer(tmp_path, target=2 * 1024)
    w.write(batch(0, 5_000))
    assert len(list((tmp_path / "data").iterdir())) >= 2
    w.abort()
    assert list((tmp_path / "data").iterdir()) == []


def test_abort_after_complete_deletes_the_files(tmp_path: Path) -> None:
    w = writer(tmp_path, target=2 * 1024)
    w.write(batch(0, 5_000))
    assert w.complete()
    w.abort()
    assert list((tmp_path / "data").iterdir()) == []


def test_nothing_written_gives_no_files(tmp_path: Path) -> None:
    w = writer(tmp_path, target=1024)
    w.write(batch(0, 0))
    assert w.complete() == []
    assert not (tmp_path / "data").exists() or list((tmp_path / "data").iterdir()) == []
