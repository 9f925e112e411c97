"""A strict reader of Prometheus' text exposition format, for the metrics tests."""

from __future__ import annotations

import re
from typing import Any

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> dict[str, Any]:
    """``{"types": {name: type}, "samples": {(name, sink, table): value}}``; fails on a
    sample whose metric has no TYPE line before it, or a malformed line."""
    types: dict[str, str] = {}
    samples: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = _SAMPLE.match(line)
        assert m, f"malformed sample line: {line!r}"
        name, labels, value = m.groups()
        assert name in types, f"sample before its TYPE line: {line!r}"
        got = dict(_LABEL.findall(labels))
        samples[(name, got["sink"], got["table"])] = float(value)
    return {"types": types, "samples": samples}
