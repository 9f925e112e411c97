"""Iceberg data files dictionary-encode only the columns where a dictionary pays (as
parquet-mr, Iceberg Java's writer, ends up writing them); the files and their metrics
read back the same everywhere.

Tests stream_sink.parquet.dictionary: which columns keep a dictionary."""

from __future__ import annotations

import pyarrow.parquet as pq
from dictionary_rows import WITH_DICTIONARY, dictionary_rows
from readers import pyiceberg_table

from stream_sink.table.catalog import Catalog
from stream_sink.tables import IcebergTable

N = 100_000


def _dictionary_by_column(table: IcebergTable) -> dict[str, bool]:
    (path,) = _paths(table)
    meta = pq.ParquetFile(path).metadata.row_group(0)
    return {
        meta.column(i).path_in_schema: meta.column(i).has_dictionary_page
        for i in range(meta.num_columns)
    }


def _paths(table: IcebergTable) -> list[str]:
    files = pyiceberg_table(table.metadata_location).inspect.files()
    return [p.removeprefix("file://") for p in files.column("file_path").to_pylist()]


def test_distinct_columns_are_written_plain_and_metrics_stay_right(catalog: Catalog) -> None:
    data = dictionary_rows(N)
    table = catalog.create_table("db.t", data.schema)
    assert isinstance(table, IcebergTable)
    table.append(data)

    assert _dictionary_by_column(table) == WITH_DICTIONARY
    assert table.scan().to_arrow().sort_by("id").equals(data)
    py = pyiceberg_table(table.metadata_location)
    assert py.scan().to_arrow().sort_by("id").equals(data)
    (f,) = py.inspect.files().to_pylist()
    assert f["record_count"] == N
    assert dict(f["value_counts"])[1] == N and dict(f["null_value_counts"])[6] == N
    assert f["readable_metrics"]["id"]["lower_bound"] == 0
    assert f["readable_metrics"]["id"]["upper_bound"] == N - 1
    assert f["readable_metrics"]["category"]["upper_bound"] == "cat-9"
    assert sum(dict(f["column_sizes"]).values()) < f["file_size_in_bytes"]


def test_dict_size_bytes_bounds_the_dictionaries_kept(catalog: Catalog) -> None:
    data = dictionary_rows(N)
    table = catalog.create_table(
        "db.t", data.schema, properties={"write.parquet.dict-size-bytes": "64"}
    )
    assert isinstance(table, IcebergTable)
    table.append(data)

    kept = _dictionary_by_column(table)
    assert kept["category"] is False  # 20 strings do not fit 64 bytes
    assert kept["maybe"] is True and kept["id"] is False
    assert table.scan().to_arrow().sort_by("id").equals(data)
