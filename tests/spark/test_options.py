"""Sink options, the sink's table, and Spark checkpoint reading: pure Python, no Spark
session.

Tests stream_sink.spark.datasource.keys: string option keys normalized alike for both
targets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.exceptions import (
    CheckpointError,
    CorruptStateError,
    InvalidOptionError,
    NoSuchTableError,
    SchemaMismatchError,
    UnknownRowKindError,
)
from stream_sink.spark import IcebergSink
from stream_sink.spark.errors import find_stream_sink_error, spark_error_message
from stream_sink.spark.options import parse_options
from stream_sink.spark.query import acknowledged_batch_ids, read_query_id


def test_defaults_put_spark_and_sink_checkpoints_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    opts = parse_options(table="db.events")
    assert opts.sink_id == "db.events"
    assert opts.checkpoint_location == str(tmp_path / "checkpoints" / "db.events")
    assert opts.spark_checkpoint_location == f"{opts.checkpoint_location}/spark"
    assert opts.sink_state_dir == str(tmp_path / "state" / "db.events")
    assert opts.mode == "append" and opts.distribution == "none"


def test_s3_locations_are_kept_and_spark_gets_s3a() -> None:
    opts = parse_options(table="db.t", checkpoint_location="s3://bucket/chk/", sink_id="orders")
    assert opts.checkpoint_location == "s3://bucket/chk"
    assert opts.spark_checkpoint_location == "s3a://bucket/chk/spark"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "merge"}, "mode='merge'"),
        ({"distribution": "random"}, "distribution='random'"),
        ({"mode": "changelog", "order_by": "seq"}, "row_kind_column"),
        ({"mode": "upsert"}, "order_by"),
        ({"mode": "append", "row_kind_column": "k"}, "row_kind_column"),
        ({"sink_id": "../x"}, "sink id"),
        ({"checkpoint_interval_batches": 0}, "checkpoint_interval_batches"),
        ({"checkpoint_interval_batches": None}, "checkpoint_interval_ms"),
        ({"order_by": ["a", "a"], "mode": "upsert"}, "twice"),
        ({"commit_mode": "async"}, "commit_mode='async'.*'synchronous'.*'pipelined'"),
        ({"resume_from_table": "q1"}, "resume_from_table='q1': expected '<job id>:<batch id>'"),
    ],
)
def test_bad_options_are_refused_with_the_option_named(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        parse_options(table="db.t", **kwargs)


def test_resume_from_table_names_a_recorded_position_on_every_front_door() -> None:
    from stream_sink.commit.source_position import ResumePoint
    from stream_sink.spark.datasource.options import parse_route_options

    opts = parse_options(table="db.t", resume_from_table="4f1c-ab:12")
    assert opts.resume_from_table == ResumePoint("4f1c-ab", 12)
    assert parse_options(**opts.as_kwargs()).resume_from_table == opts.resume_from_table
    with pytest.raises(InvalidOptionError, match="routed sink"):
        parse_options(table=None, table_column="t", resume_from_table="q:1")
    route = {"checkpointLocation": "/tmp/ck", "resume-from-table": "q:3"}
    iceberg = parse_route_options({**route, "table": "db.t"}, streaming=True)
    delta = parse_route_options({**route, "target": "delta", "path": "/tmp/d"}, streaming=True)
    assert iceberg.sink.resume_from_table == ResumePoint("q", 3)  # type: ignore[union-attr]
    assert delta.resume_from_table == ResumePoint("q", 3)  # type: ignore[union-attr]
    with pytest.raises(InvalidOptionError, match="resume-from-table='x'"):
        parse_route_options({**route, "target": "delta", "path": "/d", "resume-from-table": "x"},
                            streaming=True)  # fmt: skip


def test_query_id_and_acknowledged_batches_from_a_spark_checkpoint(tmp_path: Path) -> None:
    loc = tmp_path / "spark"
    (loc / "commits").mkdir(parents=True)
    (loc / "metadata").write_text('{"id":"7d4f0c6e-1111-2222-3333-444455556666"}\n')
    for name in ("0", "1", "12", ".12.crc", "3.tmp"):
        (loc / "commits" / name).write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert read_query_id(str(loc)) == "7d4f0c6e-1111-2222-3333-444455556666"
    assert acknowledged_batch_ids(str(loc)) == [0, 1, 12]


def test_a_query_that_never_started_there_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="checkpointLocation"):
        read_query_id(str(tmp_path / "nowhere"))
    assert acknowledged_batch_ids(str(tmp_path / "nowhere")) == []
    (tmp_path / "metadata").write_text("not json")
    with pytest.raises(CorruptStateError, match="no query id"):
        read_query_id(str(tmp_path))


def test_errors_raised_inside_spark_come_back_as_their_class() -> None:
    text = (
        "org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] "
        + spark_error_message("UnknownRowKindError", "unknown Debezium op: op=x in {}")
        + " SQLSTATE: P0001"
    )
    found = find_stream_sink_error(text)
    assert isinstance(found, UnknownRowKindError)
    assert str(found) == "unknown Debezium op: op=x in {}"
    worker = "Traceback ...\nstream_sink.exceptions.SchemaMismatchError: column 'id' is bad\n"
    assert isinstance(find_stream_sink_error(worker), SchemaMismatchError)
    assert find_stream_sink_error("java.lang.OutOfMemoryError: heap") is None
    plan = (  # an analysis error prints the plan, with the literals of raise_error in it
        "[UNRESOLVED_COLUMN] `status` cannot be resolved; Project [CASE WHEN isnull(r) THEN "
        "raise_error(USER_RAISED_EXCEPTION, map(errorMessage, concat(stream_sink."
        "ValidationError: , Debezium event has no row image: , raw))) END]"
    )
    assert find_stream_sink_error(plan) is None


def test_data_source_options_of_a_delta_target_are_checked_before_the_query_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stream_sink.spark.datasource.delta.options import DeltaRouteOptions
    from stream_sink.spark.datasource.options import SourceOptions, parse_route_options

    monkeypatch.chdir(tmp_path)
    base = {"target": "delta", "path": "lake/t", "checkpointLocation": "chk"}
    opts = parse_route_options(
        {**base, "Mode": "upsert", "equality_fields": "a, b", "order-by": "lsn"}, streaming=True
    )
    assert isinstance(opts, DeltaRouteOptions)
    assert opts.path == str(tmp_path / "lake" / "t")
    assert opts.equality_fields == ("a", "b") and opts.order_by == ("lsn",)
    assert opts.checkpoint_location == opts.spark_checkpoint_location == str(tmp_path / "chk")
    on_s3 = parse_route_options(
        {**base, "path": "s3://b/t", "S3.Endpoint": "http://h:9000"}, streaming=True
    )
    assert isinstance(on_s3, DeltaRouteOptions) and on_s3.path == "s3://b/t"
    assert on_s3.sink_kwargs()["storage_options"] == {"s3.endpoint": "http://h:9000"}
    iceberg = {"table": "db.t", "checkpointLocation": "chk", "target": "Iceberg"}
    assert isinstance(parse_route_options(iceberg, streaming=True), SourceOptions)
    for options, error in (
        ({"target": "hudi"}, r"target='hudi' is not one of iceberg, delta"),
        ({"table": "db.t"}, r"'table' is for Iceberg tables .*\.save\(DIR\)"),
        ({"catalog.warehouse": "w"}, "is for Iceberg tables"),
        ({"branch": "b"}, "no branches"),
        ({"deletes": "positions"}, r"DeltaSink\(deletes='positions'\) of foreachBatch"),
        ({"distribution": "hash"}, r"\.repartition"),
        ({"oder-by": "x"}, "unknown option 'oder-by'; options are path, mode"),
        ({"mode": "upsert", "order-by": "x"}, r"needs \.option\('equality-fields'"),
        ({"mode": "upsert", "equality-fields": "id"}, r"needs \.option\('order-by'"),
        (
            {"mode": "changelog", "equality-fields": "id", "order-by": "x"},
            r"needs \.option\('row-kind-column'",
        ),
        ({"order-by": "x"}, r"mode='append' takes no \.option\('order-by', COLUMN\)"),
        ({"mode": "merge"}, "mode='merge' is not one of"),
        ({"checkpoint-interval-batches": "2"}, "only 1 is possible"),
        ({"path": ""}, r"needs the table's location"),
    ):
        with pytest.raises(InvalidOptionError, match=error):
            parse_route_options({**base, **options}, streaming=True)
    with pytest.raises(InvalidOptionError, match=r"checkpointLocation"):
        parse_route_options({"target": "delta", "path": "p"}, streaming=True)
    assert parse_route_options({"target": "delta", "path": "p"}, streaming=False)
    with pytest.raises(InvalidOptionError, match=r"or \.option\('target', 'delta'\) to write"):
        parse_route_options({"path": "lake/t", "checkpointLocation": "c"}, streaming=True)


@pytest.mark.parametrize(
    ("kwargs", "options"),
    [
        (
            {"mode": "upsert", "equality_fields": ["id"]},
            {"mode": "upsert", "equality-fields": "id"},
        ),
        (
            {"mode": "changelog", "equality_fields": ["id"], "order_by": "seq"},
            {"mode": "changelog", "equality-fields": "id", "order-by": "seq"},
        ),
        ({"mode": "append", "row_kind_column": "k"}, {"row-kind-column": "k"}),
    ],
)
def test_every_front_door_words_a_cdc_option_mistake_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict, options: dict
) -> None:
    """IcebergSink, DeltaSink and format('stream_sink') with either target refuse a CDC
    option mistake in the same words after the sink's name, each naming the option as
    that front door takes it (a keyword argument, or ``.option(...)``)."""
    from stream_sink.spark import DeltaSink
    from stream_sink.spark.datasource.options import parse_route_options
    from stream_sink.spark.options import KEYWORD_NAMES, ROUTE_OPTION_NAMES

    monkeypatch.chdir(tmp_path)
    words = _refusal(partial(parse_options, table="db.t", **kwargs))
    assert _refusal(partial(DeltaSink, path="lake/t", **kwargs)) == words
    for keyword, option in zip(astuple(KEYWORD_NAMES), astuple(ROUTE_OPTION_NAMES), strict=True):
        words = words.replace(keyword, option)
    route = {"checkpointLocation": "chk", **options}
    for target in ({"table": "db.t"}, {"target": "delta", "path": "lake/t"}):
        assert _refusal(partial(parse_route_options, {**target, **route}, streaming=True)) == words


def _refusal(make: Callable[[], object]) -> str:
    """The InvalidOptionError ``make`` raises, after the sink's name."""
    with pytest.raises(InvalidOptionError) as refused:
        make()
    return str(refused.value).split(": ", 1)[1]


def test_maintenance_of_a_delta_target_is_set_by_string_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maintenance`` turns ``DeltaSink``'s in-sink maintenance on with its defaults;
    ``maintenance.<field>`` sets a field (and turns it on); a bad one fails at start."""
    from stream_sink.delta import DeltaMaintenanceOptions
    from stream_sink.spark.datasource.delta.options import DeltaRouteOptions
    from stream_sink.spark.datasource.options import parse_route_options

    monkeypatch.chdir(tmp_path)
    base = {"target": "delta", "path": "lake/t", "checkpointLocation": "chk"}

    def maintenance(**options: str) -> DeltaMaintenanceOptions | None:
        parsed = parse_route_options({**base, **options}, streaming=True)
        assert isinstance(parsed, DeltaRouteOptions)
        assert parsed.sink_kwargs()["maintenance"] == parsed.maintenance
        return parsed.maintenance

    assert maintenance() is None and maintenance(maintenance="false") is None
    assert maintenance(maintenance="True") == DeltaMaintenanceOptions()
    assert maintenance(**{"maintenance.every_versions": "3", "Maintenance.Vacuum": "false"}) == (
        DeltaMaintenanceOptions(every_versions=3, vacuum=False)
    )
    for options, error in (
        ({"maintenance": "yes"}, r"maintenance='yes': expected 'true' or 'false'"),
        ({"maintenance.every-versions": "ten"}, "expected an integer"),
        ({"maintenance.every-versions": "0"}, r"every_versions must be >= 1"),
        ({"maintenance.evry-versions": "3"}, r"'maintenance.evry-versions'.*every-versions"),
        (
            {"maintenance": "false", "maintenance.vacuum": "true"},
            r"drop them or set \.option\('maintenance', 'true'\)",
        ),
        ({"maintenance.compact": "true", "table": "db.t"}, "is for Iceberg tables"),
    ):
        with pytest.raises(InvalidOptionError, match=error):
            parse_route_options({**base, **options}, streaming=True)
    with pytest.raises(InvalidOptionError, match=r"unknown option 'maintenance.every-versions'"):
        parse_route_options({"table": "db.t", "maintenance.every-versions": "3"}, streaming=False)


def test_maintenance_of_an_iceberg_target_is_set_by_string_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maintenance`` turns ``IcebergSink``'s in-sink maintenance on with its defaults;
    ``maintenance.<field>`` sets any ``MaintenanceOptions`` field (and turns it on); runs
    are in the commit, never in the background; a bad option, or maintenance on a batch
    write, fails when the write starts, saying how to fix it."""
    from pyspark.sql.types import LongType, StructField, StructType

    from stream_sink.maintenance import MaintenanceOptions
    from stream_sink.spark.datasource.commit import prepare_write
    from stream_sink.spark.datasource.options import SourceOptions, parse_route_options

    monkeypatch.chdir(tmp_path)
    base = {"table": "db.t", "checkpointLocation": "chk"}

    def maintenance(**options: str) -> MaintenanceOptions | None:
        parsed = parse_route_options({**base, **options}, streaming=True)
        assert isinstance(parsed, SourceOptions)
        return parsed.maintenance

    assert maintenance() is None and maintenance(maintenance="false") is None
    assert maintenance(maintenance="TRUE") == MaintenanceOptions(background=False)
    assert maintenance(
        **{
            "maintenance.commit_count": "3",
            "Maintenance.Retain-Last": "2",
            "maintenance.max-snapshot-age-ms": "0",
            "maintenance.data-file-count": "none",
            "maintenance.remove-orphan-files": "true",
            "maintenance.background": "false",
        }
    ) == MaintenanceOptions(
        commit_count=3,
        retain_last=2,
        max_snapshot_age_ms=0,
        remove_orphan_files=True,
        background=False,
    )
    for options, error in (
        ({"maintenance": "on"}, r"maintenance='on': expected 'true' or 'false'"),
        ({"maintenance.commit-count": "ten"}, "expected an integer"),
        ({"maintenance.commit-count": "0"}, r"commit_count must be >= 1"),
        ({"maintenance.comit-count": "3"}, r"'maintenance.comit-count'.*maintenance.commit-count"),
        (
            {"maintenance": "false", "maintenance.retain-last": "2"},
            r"drop them or set \.option\('maintenance', 'true'\)",
        ),
        (
            {"maintenance.commit-count": "none", "maintenance.interval-ms": ""},
            "set at least one trigger",
        ),
        ({"maintenance.background": "true"}, r"runs in that commit.*foreachBatch"),
    ):
        with pytest.raises(InvalidOptionError, match=error):
            parse_route_options({**base, **options}, streaming=True)
    with pytest.raises(InvalidOptionError, match=r"apply to streams.*stream-sink maintain"):
        prepare_write(
            {"table": "db.t", "maintenance": "true"},
            StructType([StructField("id", LongType())]),
            streaming=False,
            overwrite=False,
        )


def test_a_sink_of_a_table_that_does_not_exist_is_refused_where_it_is_made(
    tmp_path: Path,
) -> None:
    catalog = ss.load_catalog("lake", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    with pytest.raises(NoSuchTableError) as refused:
        IcebergSink(catalog=catalog, table="db.nope", checkpoint_location=str(tmp_path / "c"))
    message = str(refused.value)
    assert "table db.nope does not exist in catalog 'lake'" in message
    assert "create it first" in message.lower() and "create_tables=True" in message
    assert not (tmp_path / "c").exists()
    catalog.create_table("db.nope", pa.schema([("id", pa.int64())]))
    sink = IcebergSink(catalog=catalog, table="db.nope", checkpoint_location=str(tmp_path / "c"))
    assert sink.sink_id == "db.nope"


def test_commit_mode_is_checked_by_every_front_door_and_refused_where_it_cannot_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``foreachBatch`` sinks take ``pipelined``; the Data Source routes commit in a
    short-lived worker per batch, so they take ``synchronous`` only and say why."""
    from stream_sink.spark import DeltaSink
    from stream_sink.spark.datasource.options import parse_route_options

    monkeypatch.chdir(tmp_path)
    assert parse_options(table="db.t").commit_mode == "synchronous"
    assert parse_options(table="db.t", commit_mode="pipelined").commit_mode == "pipelined"
    assert DeltaSink(path="lake/t", commit_mode="pipelined").commit_mode == "pipelined"
    with pytest.raises(InvalidOptionError, match="DeltaSink t: commit_mode='later'"):
        DeltaSink(path="lake/t", commit_mode="later")
    iceberg = {"table": "db.t", "checkpointLocation": "chk"}
    delta = {"target": "delta", "path": "lake/t", "checkpointLocation": "chk"}
    for base in (iceberg, delta):
        assert parse_route_options({**base, "commit-mode": "synchronous"}, streaming=True)
        with pytest.raises(InvalidOptionError, match=r"Python worker .* commit_mode='pipelined'"):
            parse_route_options({**base, "Commit_Mode": "pipelined"}, streaming=True)
        with pytest.raises(InvalidOptionError, match="commit_mode='sometimes'"):
            parse_route_options({**base, "commit-mode": "sometimes"}, streaming=True)
