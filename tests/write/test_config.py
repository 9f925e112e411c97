"""Writer settings from table properties: defaults, and bad values named."""

from __future__ import annotations

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.write.config import WriteConfig


def test_defaults_are_icebergs() -> None:
    c = WriteConfig.from_properties({})
    assert c.target_file_bytes == 512 * 1024 * 1024
    assert c.delete_target_file_bytes == 64 * 1024 * 1024
    assert c.parquet.codec == "zstd" and c.parquet.codec_level is None
    assert c.parquet.row_group_bytes == 128 * 1024 * 1024
    assert c.parquet.page_bytes == 1024 * 1024
    assert c.fanout_max_open_files == 100


def test_properties_are_read() -> None:
    c = WriteConfig.from_properties(
        {
            "write.target-file-size-bytes": "1000",
            "write.parquet.compression-codec": "SNAPPY",
            "write.parquet.compression-level": "3",
            "write.parquet.row-group-size-bytes": "2000",
            "write.fanout.max-open-files": "7",
        }
    )
    assert (c.target_file_bytes, c.parquet.codec, c.parquet.codec_level) == (1000, "snappy", 3)
    assert (c.parquet.row_group_bytes, c.fanout_max_open_files) == (2000, 7)


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"write.parquet.compression-codec": "zip"}, "write.parquet.compression-codec"),
        ({"write.target-file-size-bytes": "big"}, "write.target-file-size-bytes"),
        ({"write.target-file-size-bytes": "0"}, "write.target-file-size-bytes"),
        ({"write.fanout.max-open-files": "-1"}, "write.fanout.max-open-files"),
    ],
)
def test_bad_values_name_the_property(props: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidOptionError, match=named):
        WriteConfig.from_properties(props)
