"""Carrying stream_sink errors across Spark's process boundary.

An error raised inside Spark (by ``raise_error`` in a SQL expression, or by Python code
in an executor) reaches the driver wrapped in a Spark or Py4J exception whose message
embeds ours. :func:`reraise_stream_sink_error` finds ``stream_sink[.exceptions].<Class>:
<message>`` in that text and raises the same class on the driver, so users catch
``SchemaMismatchError`` or ``UnknownRowKindError`` whether the check ran on the driver or
on an executor.
"""

from __future__ import annotations

import re

from stream_sink import exceptions

_MARKED = re.compile(r"stream_sink(?:\.exceptions)?\.([A-Za-z]+Error): (.+)")
_TRAILER = re.compile(r"\s*(SQLSTATE: \w+)?\s*$")


def spark_error_message(error: str, text: str) -> str:
    """The prefix of a message that :func:`find_stream_sink_error` turns back into ``error``."""
    return f"stream_sink.{error}: {text}"


def find_stream_sink_error(text: str) -> exceptions.StreamSinkError | None:
    """The first stream_sink error named in ``text`` (a Spark error message), or None."""
    for match in _MARKED.finditer(text):
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
