"""A micro-batch that ``query.stop()`` interrupts: the error the sinks' ``foreachBatch``
functions raise then is one that Spark's own check (``StreamExecution.PROXY_ERROR``,
run here in the JVM) takes for a stop's interruption, and short: the Java stack trace
of the original error, matched by that check's per-character recursive pattern, made
the stream execution thread die of a StackOverflowError (see
:mod:`stream_sink.spark.errors`)."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from stream_sink.exceptions import BatchInterruptedError
from stream_sink.spark.errors import raise_if_interrupted

STREAM_EXECUTION = (
    "org.apache.spark.sql.execution.streaming.runtime.StreamExecution",  # Spark 4.1+
    "org.apache.spark.sql.execution.streaming.StreamExecution",
)


def _spark_check(spark: Any) -> Any:
    """Spark's ``PROXY_ERROR`` regex (a ``scala.util.matching.Regex``)."""
    from py4j.java_gateway import JavaClass

    for name in STREAM_EXECUTION:
        cls = spark._jvm
        for part in name.split("."):
            cls = getattr(cls, part)
        if isinstance(cls, JavaClass):
            return cls.PROXY_ERROR()
    pytest.fail(f"none of {STREAM_EXECUTION} in this Spark")


def _interrupted_call(spark: Any) -> BaseException:
    """A real Py4J error of an interrupted JVM call (this thread's JVM thread)."""
    from py4j.protocol import Py4JJavaError

    thread = spark._jvm.java.lang.Thread
    thread.currentThread().interrupt()
    with pytest.raises(Py4JJavaError) as interrupted:
        thread.sleep(60_000)
    return interrupted.value


def test_an_interrupted_batch_raises_a_short_error_spark_takes_for_a_stop(spark: Any) -> None:
    error = _interrupted_call(spark)
    assert "java.lang.InterruptedException" in str(error)
    with pytest.raises(BatchInterruptedError) as raised:
        raise_if_interrupted(error, "DeltaSink orders", 7)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    text = "".join(traceback.format_exception(raised.value))  # what Py4J hands the JVM
    assert "DeltaSink orders: micro-batch 7 was interrupted" in text
    assert "\tat " not in text  # no Java stack trace
    check = _spark_check(spark)
    assert check.findFirstIn(text).isDefined()
    assert not check.findFirstIn("DeltaSink orders: a ValueError").isDefined()

    raise_if_interrupted(ValueError("not Spark's"), "DeltaSink orders", 7)  # left alone
