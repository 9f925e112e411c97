"""Output file names: Java's OutputFileFactory pattern, unique, under the partition path."""

from __future__ import annotations

import pickle
import re

import pyarrow as pa

from stream_sink.table.arrow import schema_from_arrow
from stream_sink.table.partitioning import UNPARTITIONED_SPEC, build_partition_spec
from stream_sink.write.file_factory import OutputFileFactory

NAME = re.compile(r"^(\d{5})-(\d+)-(.+)-(\d+)-(\d{5})\.parquet$")


def test_names_follow_the_pattern_and_count_up() -> None:
    f = OutputFileFactory(
        "/wh/t/data", UNPARTITIONED_SPEC, partition_id=7, task_id=42, attempt_id=3
    )
    first, second = f.new_location(), f.new_location()
    assert first.startswith("/wh/t/data/") and first.count("/") == 4
    m1 = NAME.match(first.rsplit("/", 1)[1])
    m2 = NAME.match(second.rsplit("/", 1)[1])
    assert m1 and m2
    assert m1.groups()[:4] == ("00007", "42", f.operation_id, "3")
    assert (m1.group(5), m2.group(5)) == ("00001", "00002")


def test_operation_ids_differ_between_factories() -> None:
    a = OutputFileFactory("/d", UNPARTITIONED_SPEC, 0, 0)
    b = OutputFileFactory("/d", UNPARTITIONED_SPEC, 0, 0)
    assert a.new_location() != b.new_location()


def test_partitioned_location_uses_the_partition_path() -> None:
    schema = schema_from_arrow(pa.schema([("id", pa.int64()), ("name", pa.string())]))
    spec = build_partition_spec(schema, [("identity", "name"), ("bucket", "id", 4)]).bind(schema)
    f = OutputFileFactory("/wh/t/data", spec, 0, 0)
    loc = f.new_location(("a b/c", 3), suffix="deletes")
    assert loc.startswith("/wh/t/data/name=a+b%2Fc/id_bucket=3/")
    assert loc.endswith("-00001-deletes.parquet")
    assert f.new_location((None, None)).startswith("/wh/t/data/name=null/id_bucket=null/")


def test_pickled_factory_keeps_its_identity() -> None:
    f = OutputFileFactory("/d", UNPARTITIONED_SPEC, 1, 2, 3, "op-1")
    f.new_location()
    copy = pickle.loads(pickle.dumps(f))
    assert copy.operation_id == "op-1"
    assert copy.new_location() == f.new_location()
