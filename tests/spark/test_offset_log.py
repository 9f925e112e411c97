"""stream_sink.spark.offset_log: Spark's offset log and a Kafka source's starting offsets,
read from files laid out as Spark writes them (no Spark here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_sink.exceptions import CorruptStateError
from stream_sink.spark.offset_log import SparkOffsetLog, parse_initial_offsets, parse_offsets

META = '{"batchWatermarkMs":%d,"batchTimestampMs":1700000000000,"conf":{"a":"b"}}'


def _offsets(root: Path, batch: int, watermark: int, *sources: str) -> None:
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    text = "\n".join(["v1", META % watermark, *sources])
    (root / "offsets" / str(batch)).write_text(text)


def test_a_batch_has_each_sources_offsets_and_the_watermark_above_zero(tmp_path: Path) -> None:
    _offsets(tmp_path, 0, 0, '{"events":{"0":5,"1":7}}', "-")
    _offsets(tmp_path, 3, 1700000000123, '{"events":{"0":9,"1":7}}', '{"logOffset":2}')
    log = SparkOffsetLog(str(tmp_path))
    first = log.batch(0)
    assert first.sources == ({"events": {"0": 5, "1": 7}}, None)
    assert first.event_time_watermark_ms is None  # 0: the query has no watermark
    later = log.batch(3)
    assert later.offsets_json == '[{"events":{"0":9,"1":7}},{"logOffset":2}]'
    assert later.event_time_watermark_ms == 1700000000123


def test_a_file_that_is_not_an_offset_log_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CorruptStateError, match="not a Spark offset log"):
        parse_offsets(b'{"id":"x"}', 0, where="x")
    with pytest.raises(CorruptStateError, match="not JSON"):
        parse_offsets(b"v1\n{}\n{broken", 0, where="x")


def test_kafkas_starting_offsets_are_read_and_other_sources_are_unknown(tmp_path: Path) -> None:
    _offsets(tmp_path, 0, 0, '{"events":{"0":5}}', '{"logOffset":0}', "7")
    kafka, files, rate = (tmp_path / "sources" / str(n) for n in range(3))
    for d in (kafka, files, rate):
        d.mkdir(parents=True)
    (kafka / "0").write_bytes(b'\x00v1\n{"events":{"0":2}}')
    (files / "0").write_text('v1\n{"path":"file:/in/a.json","timestamp":1,"batchId":0}')
    (rate / "0").write_bytes(b"\x00v1\n1700000000000")
    assert SparkOffsetLog(str(tmp_path)).starting() == ({"events": {"0": 2}}, None, None)


def test_a_query_without_an_offset_log_has_no_starting_offsets(tmp_path: Path) -> None:
    assert SparkOffsetLog(str(tmp_path)).starting() is None
    assert parse_initial_offsets(b"") is None
    assert parse_initial_offsets(b'\x00v1\n{"t":3}') is None
