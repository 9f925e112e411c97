"""Which mode a write through ``format("stream_sink")`` runs in, for both targets: pure
Python, no Spark session."""

from __future__ import annotations

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.spark.datasource.write import runs_as_overwrite

ROUTE = {"where": "format('stream_sink')", "batch_where": "df.write.format('stream_sink')"}


@pytest.mark.parametrize("mode", ["append", "upsert", "changelog", "overwrite"])
def test_a_stream_keeps_its_mode(mode: str) -> None:
    assert runs_as_overwrite(mode, streaming=True, overwrite=False, **ROUTE) is False


def test_complete_output_mode_needs_mode_overwrite() -> None:
    assert runs_as_overwrite("overwrite", streaming=True, overwrite=True, **ROUTE) is False
    with pytest.raises(InvalidOptionError, match=r"outputMode\('complete'\).*mode='upsert'"):
        runs_as_overwrite("upsert", streaming=True, overwrite=True, **ROUTE)


def test_a_batch_write_with_spark_overwrite_runs_as_overwrite() -> None:
    assert runs_as_overwrite("append", streaming=False, overwrite=True, **ROUTE) is True
    assert runs_as_overwrite("overwrite", streaming=False, overwrite=True, **ROUTE) is False
    assert runs_as_overwrite("append", streaming=False, overwrite=False, **ROUTE) is False


def test_a_batch_write_refuses_stream_modes_naming_the_route_and_the_hint() -> None:
    with pytest.raises(InvalidOptionError) as err:
        runs_as_overwrite(
            "upsert", streaming=False, overwrite=False, hint=" (table.upsert())", **ROUTE
        )
    assert str(err.value) == (
        "df.write.format('stream_sink'): mode='upsert' is for streams; batch writes take "
        "mode append or overwrite (table.upsert())"
    )
