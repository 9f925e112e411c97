"""What one micro-batch wrote into a Delta table: files to add, files to remove.

The binary form (``b"SSDB"`` + uint16 version, :mod:`stream_sink.envelope`, + JSON of the
actions) travels from the
executors to the driver and into operator state. Invariants: ``from_bytes(to_bytes(b))
== b``; ``all_paths`` lists only files this batch wrote (its keys files too; never the
removed files, nor files re-added with a deletion vector, which belong to the table); a
removed file is always one the batch read (copy-on-write). A positions batch removes
nothing: its ``keys`` are resolved at commit (:mod:`.key_positions`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from stream_sink.envelope import Envelope
from stream_sink.exceptions import CorruptionError

from .actions import AddFile, RemoveFile, parse_action

MAGIC = b"SSDB"
VERSION = 3
TRUNCATE_VERSION = 2
"""Version 2 adds ``truncate``; only a truncating batch is written in it, so a stream_sink
without it refuses such a batch instead of dropping the truncate."""
KEYS_VERSION = 3
"""Version 3 adds ``keys``; only a positions batch is written in it, so a stream_sink
without it refuses such a batch instead of committing its rows without its deletes."""
ENVELOPE = Envelope(MAGIC, VERSION, "serialized DeltaBatch")


@dataclass(frozen=True)
class DeltaBatch:
    adds: tuple[AddFile, ...] = ()
    removes: tuple[RemoveFile, ...] = ()
    truncate: bool = False
    """The commit removes every file live in the version it is written on (a TRUNCATE of
    the source table); ``adds`` are the changes after it."""
    keys: tuple[str, ...] = ()
    """Locations of Parquet files of the distinct keys whose older rows the batch deletes,
    resolved to deletion vectors at commit (``deletes="positions"``,
    :mod:`.key_positions`); ``adds`` are then only the batch's new rows."""

    @property
    def is_empty(self) -> bool:
        return not (self.adds or self.removes or self.truncate or self.keys)

    @property
    def delete_files(self) -> tuple[RemoveFile, ...]:
        """The files this batch removes (rewritten by copy-on-write)."""
        return self.removes

    def all_paths(self) -> list[str]:
        """The files this batch wrote: its data files (an add that re-adds a table file
        under a new deletion vector names a file the table owns and is left out) and its
        keys files (which no table version references, so a covered or replayed batch
        deletes them with its data files)."""
        return [a.path for a in self.adds if a.deletion_vector is None] + list(self.keys)

    @staticmethod
    def merge(batches: Iterable[DeltaBatch]) -> DeltaBatch:
        adds: list[AddFile] = []
        removes: dict[str, RemoveFile] = {}
        truncate = False
        keys: list[str] = []
        for b in batches:
            adds.extend(b.adds)
            removes.update((r.path, r) for r in b.removes)
            truncate = truncate or b.truncate
            keys.extend(b.keys)
        return DeltaBatch(tuple(adds), tuple(removes.values()), truncate, tuple(keys))

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {
            "add": [a.to_json() for a in self.adds],
            "remove": [r.to_json() for r in self.removes],
        }
        version = 1
        if self.truncate:
            doc["truncate"] = True
            version = TRUNCATE_VERSION
        if self.keys:
            doc["keys"] = list(self.keys)
            version = KEYS_VERSION
        return ENVELOPE.wrap(json.dumps(doc, separators=(",", ":")).encode(), version)

    @staticmethod
    def from_bytes(raw: bytes, *, where: str = "Delta batch") -> DeltaBatch:
        payload = ENVELOPE.payload(raw, where=where)
        try:
            doc = json.loads(payload)
            where = "a serialized DeltaBatch"
            adds = tuple(parse_action({"add": a}, where=where) for a in doc["add"])
            removes = tuple(parse_action({"remove": r}, where=where) for r in doc["remove"])
            truncate = bool(doc.get("truncate", False))
            keys = tuple(str(k) for k in doc.get("keys", ()))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptionError(f"malformed DeltaBatch ({e!r})") from e
        return DeltaBatch(
            tuple(a for a in adds if isinstance(a, AddFile)),
            tuple(r for r in removes if isinstance(r, RemoveFile)),
            truncate,
            keys,
        )
