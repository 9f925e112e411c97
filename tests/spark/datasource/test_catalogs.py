"""The catalog clients ``format("stream_sink")`` keeps per driver worker process
(``stream_sink.spark.datasource.catalogs``), without Spark: one per configuration,
reused; a client whose use raised is replaced; every load sees the table as it is."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from stream_sink.spark.datasource import catalogs


def test_a_client_is_kept_per_configuration_and_replaced_after_a_failure(tmp_path: Path) -> None:
    catalogs.clear()
    props = {"type": "hadoop", "warehouse": str(tmp_path / "wh")}
    with catalogs.kept_catalog("lake", props) as first:
        first.create_namespace("db")
        first.create_table("db.t", pa.schema([("id", pa.int64())]))
    with catalogs.kept_catalog("lake", dict(props)) as again:
        assert again is first
        with again.load_table("db.t").update_schema() as u:  # another writer
            u.add_column("v", pa.string())
    with catalogs.kept_catalog("lake", props) as third:  # the table as it is now
        assert [f.name for f in third.load_table("db.t").schema().fields] == ["id", "v"]
    with catalogs.kept_catalog("other", props) as other:
        assert other is not first
    with pytest.raises(RuntimeError), catalogs.kept_catalog("lake", props):
        raise RuntimeError("the server went away")
    with catalogs.kept_catalog("lake", props) as fresh:
        assert fresh is not first
    catalogs.clear()
