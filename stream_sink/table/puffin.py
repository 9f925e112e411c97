"""Puffin files (Iceberg's ``puffin-spec``): blobs of bytes with a JSON footer.

Layout: ``Magic Blob1 .. BlobN Footer``; the footer is ``Magic FooterPayload
FooterPayloadSize Flags Magic`` where the payload is UTF-8 JSON ``{"blobs": [...],
"properties": {...}}``, its size a 4-byte little-endian int, and ``Flags`` 4 bytes
(bit 0 of byte 0: payload LZ4-compressed). Magic is ``PFA1``.

Invariants:
- Written files never compress the footer (the spec allows it; LZ4 footers are read
  refused with UnsupportedError naming the file) and write ``snapshot-id`` and
  ``sequence-number`` -1, as the spec fixes them for deletion vectors.
- A blob's ``offset``/``length`` are exactly its bytes in the file; reading checks
  both magics and that every blob lies between the header magic and the footer.
- Every damage raises CorruptDeleteFileError naming the file.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import DECODE_ERRORS, CorruptDeleteFileError, UnsupportedError
from stream_sink.io.fileio import FileIO

MAGIC = b"PFA1"
_TAIL = 4 + 4 + 4  # payload size, flags, magic
_COMPRESSED = 0x01
WRITER = "stream_sink"


@dataclass(frozen=True)
class BlobMetadata:
    """One blob as the footer describes it."""

    type: str
    fields: tuple[int, ...]
    offset: int
    length: int
    snapshot_id: int = -1
    sequence_number: int = -1
    properties: Mapping[str, str] = field(default_factory=dict)
    compression_codec: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "fields": list(self.fields),
            "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number,
            "offset": self.offset,
            "length": self.length,
        }
        if self.compression_codec is not None:
            out["compression-codec"] = self.compression_codec
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> BlobMetadata:
        return BlobMetadata(
            type=str(obj["type"]),
            fields=tuple(int(f) for f in obj.get("fields") or ()),
            offset=int(obj["offset"]),
            length=int(obj["length"]),
            snapshot_id=int(obj.get("snapshot-id", -1)),
            sequence_number=int(obj.get("sequence-number", -1)),
            properties={str(k): str(v) for k, v in (obj.get("properties") or {}).items()},
            compression_codec=obj.get("compression-codec"),
        )


@dataclass(frozen=True)
class NewBlob:
    """A blob to write: its type, the field ids it covers, its bytes and properties."""

    type: str
    fields: tuple[int, ...]
    data: bytes
    properties: Mapping[str, str] = field(default_factory=dict)


def puffin_bytes(blobs: Sequence[NewBlob]) -> tuple[bytes, list[BlobMetadata]]:
    """The bytes of a Puffin file holding ``blobs`` (in order) and their metadata."""
    out = bytearray(MAGIC)
    metas = []
    for b in blobs:
        metas.append(BlobMetadata(b.type, b.fields, len(out), len(b.data), -1, -1, b.properties))
        out += b.data
    payload = json.dumps(
        {"blobs": [m.to_json() for m in metas], "properties": {"created-by": WRITER}},
        separators=(",", ":"),
    ).encode("utf-8")
    out += MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + MAGIC
    return bytes(out), metas


def write_puffin(
    io: FileIO, location: str, blobs: Sequence[NewBlob]
) -> tuple[int, list[BlobMetadata]]:
    """Write a Puffin file (once, whole); returns its size and its blobs' metadata."""
    data, metas = puffin_bytes(blobs)
    io.write_bytes(location, data, overwrite=False)
    return len(data), metas


def read_footer(io: FileIO, location: str, file_size: int | None = None) -> list[BlobMetadata]:
    """The blobs a Puffin file's footer lists (checked against the file's size)."""
    data = io.read_bytes(location)
    return parse_footer(data, location, file_size)


def parse_footer(data: bytes, location: str, file_size: int | None = None) -> list[BlobMetadata]:
    """The blobs listed by the footer of the Puffin file ``data`` (from ``location``)."""
    size = len(data)
    if file_size is not None and file_size != size:
        raise CorruptDeleteFileError(
            f"Puffin file {location} is {size} bytes, its manifest entry says {file_size}"
        )
    if size < 2 * len(MAGIC) + _TAIL or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise CorruptDeleteFileError(
            f"Puffin file {location} has no Puffin magic (PFA1) at its start and end: "
            "not a Puffin file, or truncated"
        )
    (payload_size,) = struct.unpack("<i", data[-12:-8])
    flags = data[-8:-4]
    start = size - _TAIL - payload_size
    if payload_size < 0 or start - 4 < 4 or data[start - 4 : start] != MAGIC:
        raise CorruptDeleteFileError(
            f"Puffin file {location}: footer payload size {payload_size} does not point "
            "at the footer's magic"
        )
    if flags[0] & _COMPRESSED:
        raise UnsupportedError(
            f"Puffin file {location} has an LZ4-compressed footer, which is not read here"
        )
    try:
        payload = json.loads(data[start : start + payload_size].decode("utf-8"))
        blobs = [BlobMetadata.from_json(b) for b in payload["blobs"]]
    except DECODE_ERRORS as e:
        raise CorruptDeleteFileError(f"Puffin file {location}: malformed footer: {e!r}") from e
    for b in blobs:
        if b.offset < 4 or b.length < 0 or b.offset + b.length > start - 4:
            raise CorruptDeleteFileError(
                f"Puffin file {location}: blob {b.type} at {b.offset}+{b.length} lies "
                "outside the file's blob area"
            )
    return blobs
