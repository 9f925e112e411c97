"""Strings must be valid UTF-8 (Iceberg's string type is UTF-8; readers decode it).

Arrow does not validate string buffers built from raw bytes (a binary column cast
without checks, a JVM or C source handing over bytes as strings), and an invalid
sequence would otherwise surface far away (column bounds, a reader) naming nothing.
:func:`checked_strings` validates each string column before it is written: the error
names the column and the row; with ``invalid-utf8=replace`` every invalid sequence of a
top-level string column becomes U+FFFD instead.
"""

from __future__ import annotations

import re

import pyarrow as pa

from stream_sink.exceptions import InvalidStringError

FAIL = "fail"
REPLACE = "replace"
MODES = (FAIL, REPLACE)
_INDEX = re.compile(r"Invalid UTF8 sequence at string index (\d+)")


def checked_strings(
    col: pa.ChunkedArray, name: str, where: str, mode: str = FAIL, property_name: str = ""
) -> pa.ChunkedArray:
    """``col`` when its strings are valid UTF-8; repaired copies of the invalid chunks of
    a top-level string column in ``replace`` mode; InvalidStringError otherwise."""
    if not _has_strings(col.type):
        return col
    top = pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
    out, offset, changed = [], 0, False
    for chunk in col.chunks:
        try:
            chunk.validate(full=True)
            out.append(chunk)
        except pa.ArrowInvalid as e:
            found = _INDEX.search(str(e))
            if "UTF8" not in str(e):
                raise
            if mode == REPLACE and top:
                out.append(_repaired(chunk))
                changed = True
            else:
                raise _error(name, where, offset, found, top, mode, property_name) from e
        offset += len(chunk)
    return pa.chunked_array(out, type=col.type) if changed else col


def _error(
    name: str,
    where: str,
    offset: int,
    found: re.Match[str] | None,
    top: bool,
    mode: str,
    prop: str,
) -> InvalidStringError:
    at = f"row {offset + int(found.group(1))}" if top and found else "a nested value"
    fix = (
        "replacement works only on top-level string columns: fix the source"
        if mode == REPLACE
        else f"fix the source, or set the table property {prop or 'write.invalid-utf8'}=replace "
        "to write U+FFFD for each invalid sequence"
    )
    return InvalidStringError(
        f"table {where}: column {name!r} holds invalid UTF-8 at {at} of the data being "
        f"written; nothing was written. Iceberg strings are UTF-8: {fix}"
    )


def _repaired(chunk: pa.Array) -> pa.Array:
    raw = chunk.view(pa.large_binary() if pa.types.is_large_string(chunk.type) else pa.binary())
    values = [None if v is None else v.decode("utf-8", "replace") for v in raw.to_pylist()]
    return pa.array(values, type=chunk.type)


def _has_strings(t: pa.DataType) -> bool:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_strings(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_strings(t.value_type)
    if pa.types.is_map(t):
        return _has_strings(t.key_type) or _has_strings(t.item_type)
    return False
