"""``configuration.<key>`` options of ``format("stream_sink")`` with target ``delta``:
checked before the query starts, without Spark."""

from __future__ import annotations

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.spark.datasource.delta.options import parse_delta_options


def test_configuration_options_keep_delta_lakes_spelling_of_lower_cased_keys() -> None:
    parsed = parse_delta_options(
        {
            "target": "delta",
            "path": "/tmp/t",
            "checkpointLocation": "/tmp/chk",
            # Spark hands the Data Source its option keys lower-cased
            "configuration.delta.appendonly": "true",
            "configuration.delta.checkpointinterval": "5",
            "configuration.team": "orders",
        },
        streaming=True,
    )
    assert parsed.sink_kwargs()["configuration"] == {
        "delta.appendOnly": "true",
        "delta.checkpointInterval": "5",
        "team": "orders",
    }
    with pytest.raises(InvalidOptionError, match="names no configuration key"):
        parse_delta_options(
            {"path": "/tmp/t", "checkpointLocation": "/tmp/c", "configuration.": "x"},
            streaming=True,
        )
