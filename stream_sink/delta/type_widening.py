"""Type widening (PROTOCOL.md "Type Widening"): the type changes a table's schema records
in ``delta.typeChanges`` must each be one the protocol allows; reading then casts older
files' narrower values to the current type (:mod:`.column_mapping`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from stream_sink.exceptions import UnsupportedError

from .schema import TYPE_CHANGES, schema_fields

_INTEGERS = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def allowed(from_type: str, to_type: str) -> bool:
    """True for the widenings the protocol lists (Delta Lake 4.4 on Spark refuses the
    others too, byte -> decimal(5,2) among them)."""
    if from_type in _INTEGERS and to_type in _INTEGERS:
        return _INTEGERS.index(from_type) < _INTEGERS.index(to_type)
    if (from_type, to_type) == ("float", "double") or (from_type, to_type) == (
        "date",
        "timestamp_ntz",
    ):
        return True
    if from_type in _INTEGERS[:3] and to_type == "double":
        return True
    to = _DECIMAL.match(to_type)
    if to is None:
        return False
    p2, s2 = int(to.group(1)), int(to.group(2))
    frm = _DECIMAL.match(from_type)
    if frm is not None:
        p1, s1 = int(frm.group(1)), int(frm.group(2))
        return p2 - p1 >= s2 - s1 >= 0
    base = {"byte": 10, "short": 10, "integer": 10, "long": 20}.get(from_type)
    return base is not None and p2 - base >= s2 >= 0


def _changes(fields: list[dict[str, Any]], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for f in fields:
        here = f"{path}{f['name']}"
        for change in (f.get("metadata") or {}).get(TYPE_CHANGES) or ():
            yield here, change
        yield from _nested(f["type"], here)


def _nested(t: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(t, dict):
        return
    if t.get("type") == "struct":
        yield from _changes(t["fields"], f"{path}.")
    elif t.get("type") == "array":
        yield from _nested(t["elementType"], f"{path}.element")
    elif t.get("type") == "map":
        yield from _nested(t["keyType"], f"{path}.key")
        yield from _nested(t["valueType"], f"{path}.value")


def check_type_changes(schema_string: str, where: str) -> None:
    """Raise UnsupportedError naming a recorded type change the protocol does not allow."""
    for path, change in _changes(schema_fields(schema_string), ""):
        frm, to = str(change.get("fromType")), str(change.get("toType"))
        if not allowed(frm, to):
            raise UnsupportedError(
                f"{where}: column {path!r} records a type change {frm} -> {to}, which "
                'type widening does not allow (PROTOCOL.md "Type Widening"; Delta Lake '
                "on Spark refuses it too): reading such a table is not supported, as its "
                "older files' values are not defined in the new type"
            )
