"""Carrying stream_sink errors across Spark's process boundary.

An error raised inside Spark (by ``raise_error`` in a SQL expression, or by Python code
in an executor) reaches the driver wrapped in a Spark or Py4J exception whose message
embeds ours. :func:`reraise_stream_sink_error` finds ``stream_sink[.exceptions].<Class>:
<message>`` in that text and raises the same class on the driver, so users catch
``SchemaMismatchError`` or ``UnknownRowKindError`` whether the check ran on the driver or
on an executor.

A micro-batch interrupted by ``query.stop()`` raises (from its Py4J calls) a Py4J error
carrying the whole Java stack trace. Spark 4 decides whether a ``foreachBatch`` error
is that interruption by matching the Python traceback against
``StreamExecution.PROXY_ERROR`` (``py4j.protocol.Py4JJavaError: An error occurred while
calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|…)``, from SPARK-48717), whose
alternation under ``*`` recurses once per character in Java's regex engine: on a
traceback of some thousands of characters the stream execution thread dies of a
``StackOverflowError`` instead of stopping cleanly. :func:`raise_if_interrupted` turns
such an error into a :class:`~stream_sink.exceptions.BatchInterruptedError` raised
without its chain, whose last line reads as the interruption Spark looks for, a few
dozen characters from the end of the traceback (the original is logged).
"""

from __future__ import annotations

import logging
import re

from stream_sink import exceptions

log = logging.getLogger(__name__)

INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""The Java exceptions Spark takes for a stop's interruption (``IO_EXCEPTION_NAMES``)."""
PY4J_ERROR = "py4j.protocol.Py4JJavaError"

_MARKED = re.compile(r"stream_sink(?:\.exceptions)?\.([A-Za-z]+Error): (.+)")
_TRAILER = re.compile(r"\s*(SQLSTATE: \w+)?\s*$")
_IN_A_PLAN = "concat("


def spark_error_message(error: str, text: str) -> str:
    """The prefix of a message that :func:`find_stream_sink_error` turns back into ``error``."""
    return f"stream_sink.{error}: {text}"


def find_stream_sink_error(text: str) -> exceptions.StreamSinkError | None:
    """The first stream_sink error named in ``text`` (a Spark error message), or None."""
    for match in _MARKED.finditer(text):
        if text[: match.start()].endswith(_IN_A_PLAN):
            continue  # a raise_error's literal in a printed plan (an analysis error's)
        cls = getattr(exceptions, match.group(1), None)
        if isinstance(cls, type) and issubclass(cls, exceptions.StreamSinkError):
            message = _TRAILER.sub("", match.group(2).strip())
            return cls(message)
    return None


def reraise_stream_sink_error(error: BaseException) -> None:
    """Raise the stream_sink error embedded in ``error`` (chained); return when none is."""
    found = find_stream_sink_error(str(error))
    if found is not None:
        raise found from error


def raise_if_interrupted(error: BaseException, where: str, batch_id: int) -> None:
    """Raise :class:`~stream_sink.exceptions.BatchInterruptedError` (without a chain)
    when ``error`` is a Py4J error of a call that Spark interrupted; return otherwise.
    Call it in the ``except`` block of a ``foreachBatch`` function (see module doc)."""
    from py4j.protocol import Py4JJavaError

    if not isinstance(error, Py4JJavaError):
        return
    text = str(error)
    name = next((n for n in INTERRUPTIONS if n in text), None)
    if name is None:
        return
    call = text.strip().split("\n", 1)[0].strip()
    log.info("%s: micro-batch %d interrupted: %s", where, batch_id, text)
    raise exceptions.BatchInterruptedError(
        f"{where}: micro-batch {batch_id} was interrupted (the query is stopping); the "
        f"query's next run writes it again. {PY4J_ERROR}: {call}\n: {name}"
    ) from None
