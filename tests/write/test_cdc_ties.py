"""Counting ties in CDC order values (what the executors do before writing)."""

from __future__ import annotations

import pyarrow as pa

from stream_sink.spark.cdc.ties import count_ties


def test_ties_are_counted_across_batch_boundaries_and_extra_columns_dropped() -> None:
    order = pa.StructArray.from_arrays([pa.array([1, 1, 2]), pa.array([0, 0, 0])], ["lsn", "c"])
    first = pa.record_batch({"id": [1, 1, 1], "o": order, "seq": [0, 1, 2], "v": ["a", "b", "c"]})
    later = pa.StructArray.from_arrays([pa.array([2, 2]), pa.array([0, 0])], ["lsn", "c"])
    second = pa.record_batch({"id": [1, 2], "o": later, "seq": [3, 4], "v": ["d", "e"]})
    counter = [0]
    out = list(count_ties(iter([first, second]), ("id", "o"), ("o", "seq"), counter))
    assert counter == [2]  # (1, lsn 1) in the first batch, (1, lsn 2) across the boundary
    assert [b.schema.names for b in out] == [["id", "v"], ["id", "v"]]
