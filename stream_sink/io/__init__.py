"""File IO over pyarrow.fs (local, S3, HDFS)."""

from stream_sink.io.fileio import FileIO

__all__ = ["FileIO"]
