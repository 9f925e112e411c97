"""``register(spark)``: make ``format("stream_sink")`` available in a SparkSession."""

from __future__ import annotations

from typing import Any

from stream_sink.exceptions import UnsupportedError

MIN_PYSPARK = (4, 0)


def pyspark_version() -> tuple[int, int]:
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def supports_data_source() -> bool:
    """True when this pyspark has the Python Data Source API (4.0 and later)."""
    return pyspark_version() >= MIN_PYSPARK


def register(spark: Any) -> None:
    """Register the ``stream_sink`` format with ``spark`` (pyspark >= 4.0).

    On older pyspark raises UnsupportedError: use ``IcebergSink`` with ``foreachBatch``.
    """
    if not supports_data_source():
        import pyspark

        raise UnsupportedError(
            f"format('stream_sink') needs pyspark 4.0 or later (this is {pyspark.__version__}): "
            "use IcebergSink with writeStream.foreachBatch(sink.foreach_batch), or sink.start(df)"
        )
    from stream_sink.spark.datasource.adapter import StreamSinkDataSource

    spark.dataSource.register(StreamSinkDataSource)
