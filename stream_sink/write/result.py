"""What one or more task writers produced, and its compact binary form.

The binary form travels from executors to the driver and into operator state: the
envelope of :mod:`stream_sink.envelope` (``b"SSWR"`` + uint16 version) around
zlib-compressed JSON. Values JSON cannot hold
exactly are tagged: ``["y", base64]`` bytes, ``["d", text]`` decimals, ``["f", hex]``
floats (NaN and -0.0 survive), ``["t", [...]]`` tuples, ``["m", [[k, v], ...]]`` dicts.

Invariants:
- ``from_bytes(to_bytes(r)) == r`` for every WriteResult, every DataFile field
  included (bounds bytes, partition values of every type, enums).
- Version 2 adds ``truncate`` (the batch empties its table first: a TRUNCATE of the
  source, see ``stream_sink.spark.cdc.truncation``) and is written only for such a
  result, so a stream_sink without it refuses the result (UnsupportedError) instead of
  dropping the truncate; every other result is written as version 1, which every
  stream_sink reads. A newer version is UnsupportedError (the envelope's policy);
  damaged bytes are CorruptionError, never guessed at. The form that precedes the
  common envelope (``b"SSWR\x01"`` + zlib, one version byte) is read too.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from stream_sink.envelope import Envelope
from stream_sink.exceptions import CorruptionError
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat

MAGIC = b"SSWR"
VERSION = 2
TRUNCATE_VERSION = 2
"""The first version that can say ``truncate``; results without it are written as 1."""
ENVELOPE = Envelope(MAGIC, VERSION, "serialized WriteResult")
_LEGACY_HEADER = MAGIC + b"\x01"
"""The header before the common envelope: one version byte, then zlib (``0x78``)."""
_FIELDS = tuple(f.name for f in dataclasses.fields(DataFile))


@dataclass(frozen=True)
class WriteResult:
    data_files: tuple[DataFile, ...] = ()
    delete_files: tuple[DataFile, ...] = ()
    referenced_data_files: tuple[str, ...] = ()
    truncate: bool = False
    """The table is emptied (every live data and delete file removed) in the commit that
    adds these files: the batch carried a TRUNCATE of its source table and these are the
    changes after it."""

    @property
    def is_empty(self) -> bool:
        """Nothing to commit: no file and no truncate."""
        return not (self.data_files or self.delete_files or self.truncate)

    @staticmethod
    def merge(results: Iterable[WriteResult]) -> WriteResult:
        """All files of ``results`` in order; referenced paths once each; truncating when
        any of them is (the results of one batch's tasks)."""
        data: list[DataFile] = []
        deletes: list[DataFile] = []
        referenced: dict[str, None] = {}
        truncate = False
        for r in results:
            data.extend(r.data_files)
            deletes.extend(r.delete_files)
            referenced.update(dict.fromkeys(r.referenced_data_files))
            truncate = truncate or r.truncate
        return WriteResult(tuple(data), tuple(deletes), tuple(referenced), truncate)

    def all_paths(self) -> list[str]:
        return [f.file_path for f in (*self.data_files, *self.delete_files)]

    # --- binary form ---------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        doc = {
            "data": [_file_to_json(f) for f in self.data_files],
            "deletes": [_file_to_json(f) for f in self.delete_files],
            "referenced": list(self.referenced_data_files),
        }
        if self.truncate:
            doc["truncate"] = True
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
        return ENVELOPE.wrap(zlib.compress(text, 6), TRUNCATE_VERSION if self.truncate else 1)

    @staticmethod
    def from_bytes(raw: bytes, *, where: str = "write result") -> WriteResult:
        if raw.startswith(_LEGACY_HEADER):
            payload = bytes(raw[len(_LEGACY_HEADER) :])
        else:
            payload = ENVELOPE.payload(raw, where=where)
        try:
            doc = json.loads(zlib.decompress(payload))
            return WriteResult(
                tuple(_file_from_json(f) for f in doc["data"]),
                tuple(_file_from_json(f) for f in doc["deletes"]),
                tuple(str(p) for p in doc["referenced"]),
                bool(doc.get("truncate", False)),
            )
        except (zlib.error, ValueError, KeyError, TypeError) as e:
            raise CorruptionError(f"damaged serialized WriteResult: {e}") from e


def _file_to_json(f: DataFile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(f, name)
        if value is None:
            continue
        if name == "content":
            value = int(value)
        elif name == "file_format":
            value = value.value
        out[name] = _enc(value)
    return out


def _file_from_json(obj: dict[str, Any]) -> DataFile:
    unknown = set(obj) - set(_FIELDS)
    if unknown:
        raise ValueError(f"unknown DataFile fields {sorted(unknown)}")
    kwargs = {k: _dec(v) for k, v in obj.items()}
    kwargs["content"] = DataFileContent(kwargs["content"])
    kwargs["file_format"] = FileFormat(kwargs["file_format"])
    return DataFile(**kwargs)


def _enc(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return ["f", v.hex()]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return ["y", base64.b64encode(bytes(v)).decode("ascii")]
    if isinstance(v, Decimal):
        return ["d", str(v)]
    if isinstance(v, (tuple, list)):
        return ["t", [_enc(x) for x in v]]
    if isinstance(v, dict):
        return ["m", [[_enc(k), _enc(x)] for k, x in v.items()]]
    raise TypeError(f"cannot serialize {type(v).__name__} value {v!r}")


def _dec(v: Any) -> Any:
    if not isinstance(v, list):
        return v
    tag, body = v
    if tag == "f":
        return float.fromhex(body)
    if tag == "y":
        return base64.b64decode(body)
    if tag == "d":
        return Decimal(body)
    if tag == "t":
        return tuple(_dec(x) for x in body)
    if tag == "m":
        return {_dec(k): _dec(x) for k, x in body}
    raise ValueError(f"unknown tag {tag!r}")
