"""Writer settings read once from table properties (the only place strings are parsed).

Properties (Iceberg's names and defaults unless noted):
- ``write.target-file-size-bytes`` (512 MiB), ``write.delete.target-file-size-bytes`` (64 MiB)
- ``write.parquet.compression-codec`` (zstd), ``write.parquet.compression-level`` (codec default)
- ``write.parquet.row-group-size-bytes`` (128 MiB), ``write.parquet.page-size-bytes`` (1 MiB)
- ``write.parquet.dict-size-bytes`` (Iceberg: 2 MiB; unset here means Arrow's 1 MiB, which
  writes high-cardinality columns markedly faster: bench/bench_append.py)
- ``write.fanout.max-open-files`` (100, this project's): open files a fanout writer keeps.
- ``write.fanout.max-buffered-bytes`` (256 MiB, this project's): Arrow bytes all open
  files of one task may hold in unwritten row groups together.

Invariants:
- Every value is validated here; a bad one raises InvalidOptionError naming the property.
- Instances are frozen and picklable (they travel inside a TaskWriterFactory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stream_sink.exceptions import InvalidOptionError

TARGET_FILE_SIZE = "write.target-file-size-bytes"
DELETE_TARGET_FILE_SIZE = "write.delete.target-file-size-bytes"
CODEC = "write.parquet.compression-codec"
CODEC_LEVEL = "write.parquet.compression-level"
ROW_GROUP_SIZE = "write.parquet.row-group-size-bytes"
PAGE_SIZE = "write.parquet.page-size-bytes"
DICT_SIZE = "write.parquet.dict-size-bytes"
FANOUT_MAX_OPEN_FILES = "write.fanout.max-open-files"
FANOUT_MAX_BUFFERED = "write.fanout.max-buffered-bytes"
INVALID_UTF8 = "write.invalid-utf8"
"""This project's: ``fail`` (default) refuses a string that is not UTF-8 naming column and
row; ``replace`` writes U+FFFD for each invalid sequence."""

_MIB = 1024 * 1024
_CODECS = {
    "uncompressed": "none",
    "none": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "zstd": "zstd",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "brotli": "brotli",
}

# Java checks the file size every 1,000 rows (BaseRollingWriter.ROWS_DIVISOR).
SIZE_CHECK_ROWS = 1000


@dataclass(frozen=True)
class ParquetOptions:
    """How one Parquet file is encoded."""

    codec: str = "zstd"
    codec_level: int | None = None
    row_group_bytes: int = 128 * _MIB
    page_bytes: int = _MIB
    dict_page_bytes: int | None = None

    def writer_kwargs(self) -> dict[str, object]:
        """Keyword arguments of ``pyarrow.parquet.ParquetWriter`` for these settings
        (row groups are cut by the caller, at ``row_group_bytes``)."""
        return {
            "compression": self.codec,
            "compression_level": self.codec_level,
            "data_page_size": self.page_bytes,
            "dictionary_pagesize_limit": self.dict_page_bytes,
            "write_statistics": True,
        }


@dataclass(frozen=True)
class WriteConfig:
    """All settings a task writer needs."""

    parquet: ParquetOptions = field(default_factory=ParquetOptions)
    target_file_bytes: int = 512 * _MIB
    delete_target_file_bytes: int = 64 * _MIB
    fanout_max_open_files: int = 100
    fanout_max_buffered_bytes: int = 256 * _MIB
    size_check_rows: int = SIZE_CHECK_ROWS
    invalid_utf8: str = "fail"

    @staticmethod
    def from_properties(props: Mapping[str, str]) -> WriteConfig:
        codec_name = props.get(CODEC, "zstd").strip().lower()
        if codec_name not in _CODECS:
            raise InvalidOptionError(
                f"table property {CODEC}={codec_name!r}: expected one of {sorted(_CODECS)}"
            )
        level = props.get(CODEC_LEVEL)
        parquet = ParquetOptions(
            codec=_CODECS[codec_name],
            codec_level=_int(props, CODEC_LEVEL, 0, allow_negative=True) if level else None,
            row_group_bytes=_int(props, ROW_GROUP_SIZE, 128 * _MIB),
            page_bytes=_int(props, PAGE_SIZE, _MIB),
            dict_page_bytes=_int(props, DICT_SIZE, 0) if DICT_SIZE in props else None,
        )
        invalid_utf8 = props.get(INVALID_UTF8, "fail").strip().lower()
        if invalid_utf8 not in ("fail", "replace"):
            raise InvalidOptionError(
                f"table property {INVALID_UTF8}={invalid_utf8!r}: expected 'fail' or 'replace'"
            )
        return WriteConfig(
            invalid_utf8=invalid_utf8,
            parquet=parquet,
            target_file_bytes=_int(props, TARGET_FILE_SIZE, 512 * _MIB),
            delete_target_file_bytes=_int(props, DELETE_TARGET_FILE_SIZE, 64 * _MIB),
            fanout_max_open_files=_int(props, FANOUT_MAX_OPEN_FILES, 100),
            fanout_max_buffered_bytes=_int(props, FANOUT_MAX_BUFFERED, 256 * _MIB),
        )


def _int(props: Mapping[str, str], key: str, default: int, allow_negative: bool = False) -> int:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidOptionError(f"table property {key} must be an integer, got {raw!r}") from None
    if value <= 0 and not allow_negative:
        raise InvalidOptionError(f"table property {key} must be positive, got {raw!r}")
    return value
