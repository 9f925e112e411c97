"""Turning raw storage failures into errors that name the path.

pyarrow and RocksDB report a full disk or a read-only directory without the file
(``OSError: [Errno 28] Error writing bytes to file``, ``IO error: …``). Code that knows
which file it writes wraps the step in :func:`io_failure`; callers higher up add the
table, the batch and what it means for the data, chaining this error.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from stream_sink.exceptions import SinkIOError, StreamSinkError

log = logging.getLogger(__name__)


def describe(e: BaseException) -> str:
    """``e`` in one line, with the errno's name when there is one."""
    code = getattr(e, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    text = str(e).strip() or type(e).__name__
    return f"{name}: {text}" if name and name not in text else text


@contextmanager
def io_failure(what: str, path: str) -> Iterator[None]:
    """Re-raise an OSError inside as SinkIOError(``<what> <path> failed: <cause>``)."""
    try:
        yield
    except StreamSinkError:
        raise
    except OSError as e:
        raise SinkIOError(f"{what} {path} failed: {describe(e)}") from e


def quietly(action: Callable[[], object], what: str) -> None:
    """Run a cleanup ``action``; a failure only logs, so it never hides the error
    that made the cleanup necessary."""
    try:
        action()
    except Exception as e:
        log.warning("%s failed: %s", what, describe(e))
