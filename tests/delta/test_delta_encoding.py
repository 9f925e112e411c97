"""Delta data files dictionary-encode only the columns where a dictionary pays, as
Delta Lake's own writer does; the files read back the same everywhere."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from dictionary_rows import WITH_DICTIONARY, dictionary_rows

from stream_sink.delta import DeltaTable


def test_distinct_columns_are_written_plain_and_repeated_ones_with_a_dictionary(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable as RsTable

    loc = tmp_path / "t"
    data = dictionary_rows(200_000)
    table = DeltaTable.create(str(loc), data.schema)
    table.append(data)

    (add,) = table.refresh().snapshot.files.values()
    meta = pq.ParquetFile(loc / add.path).metadata.row_group(0)
    with_dictionary = {
        meta.column(i).path_in_schema: meta.column(i).has_dictionary_page
        for i in range(meta.num_columns)
    }
    assert with_dictionary == WITH_DICTIONARY
    assert all(meta.column(i).is_stats_set for i in range(meta.num_columns))
    assert all(meta.column(i).has_column_index for i in range(meta.num_columns))
    assert table.to_arrow().sort_by("id").equals(data)
    assert RsTable(str(loc)).to_pyarrow_table().sort_by("id").equals(data)
