"""The route log of a routed sink: which tables each batch wrote, kept until every one
of them committed it, per Spark query."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_sink.checkpoints.route_log import RouteLog
from stream_sink.exceptions import CorruptMetadataError
from stream_sink.io.fileio import FileIO


def _log(tmp_path: Path, job: str = "job-1") -> RouteLog:
    location = str(tmp_path / "sink.routes.json")
    return RouteLog(FileIO.for_location(location), location, job)


def test_each_table_is_checked_for_the_acknowledged_batches_that_wrote_it(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path)
    log.record(0, ["db.a", "db.b"])
    log.record(1, ["db.b"])
    log.record(2, ["db.a"])
    again = _log(tmp_path)  # durable: a restart reads what was recorded
    assert again.acknowledged_for("db.a", [0, 1, 2]) == [0, 2]
    assert again.acknowledged_for("db.b", [0, 1]) == [0, 1]  # batch 2 not acknowledged
    assert again.acknowledged_for("db.c", [0, 1, 2]) == []


def test_a_batch_is_forgotten_once_every_table_it_wrote_committed_it(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.record(0, ["db.a", "db.b"])
    log.record(1, ["db.a"])
    log.drop_committed({"db.a": 1, "db.b": -1})
    assert dict(_log(tmp_path).batches) == {0: ("db.a", "db.b")}
    log.drop_committed({"db.a": 1, "db.b": 0})
    assert dict(_log(tmp_path).batches) == {}


def test_a_new_query_starts_an_empty_log_and_a_torn_one_is_named(tmp_path: Path) -> None:
    _log(tmp_path, "job-1").record(3, ["db.a"])
    assert dict(_log(tmp_path, "job-2").batches) == {}
    (tmp_path / "sink.routes.json").write_text("{not json")
    with pytest.raises(CorruptMetadataError, match=r"sink\.routes\.json"):
        _log(tmp_path)
