"""Which columns of a Parquet data file are dictionary-encoded.

Arrow dictionary-encodes every column until the dictionary page reaches its limit
(1 MiB unless set) and only then falls back to plain pages, so a column of mostly
distinct values (a sequential id, a timestamp, a random double) carries a full
dictionary page plus indices for its first rows on top of the plain values. parquet-mr
(the writer of Delta Lake's Spark writer and of Iceberg Java's) re-encodes such a column
plainly when its first page shows the dictionary does not pay, or falls back to plain
once the dictionary outgrows its page limit. Here the choice is made per file (or row
group) from the rows themselves: a top-level column keeps its dictionary when the
dictionary and its indices are smaller than the plain values and the dictionary fits
one dictionary page (``dict_page_bytes``: Iceberg's ``write.parquet.dict-size-bytes``
when set); nested and boolean columns always keep it (Arrow's choice).

Invariant: only the encoding changes; values, types, statistics and the file's readers
are the same either way (dictionary encoding is optional in Parquet).
"""

from __future__ import annotations

import functools
import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

DICT_PAGE_BYTES = 1024 * 1024
"""Arrow's default ``dictionary_pagesize_limit``."""

PROBE_ROWS = 65_536
"""Values a column's first probe looks at before its whole length (a rough page)."""


def dictionary_columns(data: pa.Table, dict_page_bytes: int | None = None) -> list[str] | bool:
    """``use_dictionary`` for writing ``data``: True (every column) or the leaf column
    paths that keep their dictionary; ``dict_page_bytes``: the dictionary page limit the
    writer is given (None: Arrow's default)."""
    if data.num_rows == 0:
        return True
    limit = DICT_PAGE_BYTES if dict_page_bytes is None else dict_page_bytes
    plain = [
        f.name for f in data.schema if _is_flat(f.type) and not _pays(data.column(f.name), limit)
    ]
    if not plain:
        return True
    return [p for p in _leaf_paths(data.schema) if p not in plain]


def _is_flat(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_boolean(t))


def _pays(column: pa.ChunkedArray, limit: int) -> bool:
    """Whether the dictionary and its indices are smaller than the plain values and the
    dictionary fits ``limit`` bytes: first on the column's first :data:`PROBE_ROWS`
    values (parquet-mr decides on its first page; this spares hashing every value of a
    column of distinct values), then, if they pay, on the whole column."""
    width = column.nbytes / max(column.length(), 1)  # offsets and validity count as width
    if column.length() > PROBE_ROWS and not _pays_on(column.slice(0, PROBE_ROWS), width, limit):
        return False
    return _pays_on(column, width, limit)


def _pays_on(column: pa.ChunkedArray, width: float, limit: int) -> bool:
    values = column.length() - column.null_count
    if values == 0:
        return True
    distinct = pc.count_distinct(column).as_py()
    dictionary = distinct * width
    indices = values * max(distinct - 1, 1).bit_length() / 8
    return dictionary <= limit and dictionary + indices < values * width


@functools.lru_cache(maxsize=64)
def _leaf_paths(schema: pa.Schema) -> tuple[str, ...]:
    """The Parquet leaf column paths of ``schema`` (as Arrow names them); kept per schema,
    as every data file of a table asks for the same ones."""
    buf = io.BytesIO()
    pq.write_table(schema.empty_table(), buf)
    parquet_schema = pq.ParquetFile(pa.BufferReader(buf.getvalue())).schema
    return tuple(parquet_schema.column(i).path for i in range(len(parquet_schema)))
