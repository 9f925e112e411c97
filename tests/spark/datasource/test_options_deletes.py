"""stream_sink.spark.datasource.options: the ``deletes`` option of ``format("stream_sink")``
reaches the sink's options (routed sinks share them), checked as ``IcebergSink``'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.spark.datasource.options import SourceOptions, parse_route_options


def _options(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "table": "db.t",
        "catalog.warehouse": str(tmp_path / "w"),
        "checkpointLocation": str(tmp_path / "chk"),
        "mode": "upsert",
        "order-by": "lsn",
        **extra,
    }


def test_the_route_takes_deletes_positions(tmp_path: Path) -> None:
    opts = parse_route_options(_options(tmp_path, deletes="positions"), streaming=True)
    assert isinstance(opts, SourceOptions)
    assert opts.sink.deletes == "positions"
    default = parse_route_options(_options(tmp_path), streaming=True)
    assert isinstance(default, SourceOptions) and default.sink.deletes == "equality"


def test_the_route_refuses_positions_outside_the_cdc_modes(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="deletes='positions' needs mode"):
        parse_route_options(_options(tmp_path, mode="append", deletes="positions"), streaming=True)
    with pytest.raises(InvalidOptionError, match="is not one of equality, positions"):
        parse_route_options(_options(tmp_path, deletes="dv"), streaming=True)
