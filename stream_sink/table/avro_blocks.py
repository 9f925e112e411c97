"""The data blocks of an Avro container file, decoded without trusting their counts.

Avro spec, "Object Container Files": after the header, each block is a record count
and a byte size (zig-zag varint longs), that many bytes (compressed by the file's
codec), then the file's 16-byte sync marker.

Invariants (a writer of a shared table must not be able to exhaust a reader's memory
with a small file):
- A varint takes at most 10 bytes (a long); a count or size is never negative.
- A block inflates to at most :func:`inflate_limit` of its compressed size (decompression
  stops there: zlib's, bz2's and lzma's ``max_length``, a bounded read for zstandard).
- A block's record count is at most what its inflated bytes can hold, at the fewest
  bytes one record of the writer schema takes (:func:`min_record_bytes`); a schema whose
  records, or whose array items, can take no bytes at all is refused, since a count
  could then claim any number of them. The records read must end exactly at the end of
  the block.
- With ``max_records`` (the cardinality the caller expects, a manifest list's file
  counts), a file whose blocks claim more stops before the block that passes it.
Every violation raises ValueError naming the block; the caller names the file.
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from collections.abc import Callable
from typing import Any

import fastavro

INFLATE_RATIO = 64
"""A compressed block may inflate to this many times its size (beyond the floor)..."""
INFLATE_FLOOR = 1 << 20
"""...and always to 1 MiB: Java's and fastavro's writers cut blocks at 64 KB and 16 KB
of uncompressed records, so real blocks stay far below both bounds."""
INFLATE_CAP = 64 << 20
"""No block inflates beyond 64 MiB, whatever its size."""
_MAX_VARINT_BYTES = 10
_PRIMITIVE_BYTES = {
    "null": 0,
    "boolean": 1,
    "int": 1,
    "long": 1,
    "float": 4,
    "double": 8,
    "bytes": 1,
    "string": 1,
}
_DECOMPRESSORS: dict[str, Callable[[], Any]] = {
    "deflate": lambda: zlib.decompressobj(-15),
    "bzip2": bz2.BZ2Decompressor,
    "xz": lzma.LZMADecompressor,
}
CODECS = ("null", *_DECOMPRESSORS, "zstandard")
"""The codecs decoded here with bounded decompression; others go through fastavro's
block reader with their counts bounded alike (see :func:`read_with_fastavro`)."""


def inflate_limit(compressed: int) -> int:
    """The most bytes a block of ``compressed`` bytes may inflate to."""
    return min(INFLATE_CAP, max(INFLATE_FLOOR, INFLATE_RATIO * compressed))


def read_blocks(
    stream: io.BytesIO,
    end: int,
    sync: bytes,
    codec: str,
    schema: Any,
    min_bytes: int,
    max_records: int | None = None,
) -> list[Any]:
    """The records of the blocks from ``stream``'s position to ``end``; ``schema`` is
    the writer schema as ``fastavro.parse_schema`` returns it, ``min_bytes`` its
    :func:`min_record_bytes`."""
    records: list[Any] = []
    while stream.tell() < end:
        at = stream.tell()
        count, size = _read_long(stream), _read_long(stream)
        if count < 0 or size < 0:
            raise ValueError(f"bad block header at byte {at}")
        block = stream.read(size)
        if len(block) != size or stream.read(16) != sync:
            raise ValueError(f"truncated block or wrong sync marker before byte {stream.tell()}")
        body = inflate(codec, block, at)
        check_count(count, len(body), min_bytes, at)
        if max_records is not None and len(records) + count > max_records:
            raise ValueError(
                f"the block at byte {at} brings the records to {len(records) + count}, more "
                f"than the {max_records} expected"
            )
        reader = io.BytesIO(body)
        records.extend(fastavro.schemaless_reader(reader, schema, None) for _ in range(count))
        if reader.tell() != len(body):
            raise ValueError(
                f"the {count} records of the block at byte {at} end at byte {reader.tell()} "
                f"of its {len(body)}"
            )
    return records


def read_with_fastavro(
    container: io.BytesIO, min_bytes: int, max_records: int | None = None
) -> list[Any]:
    """The records of a whole container file in a codec not decoded here (snappy, lz4),
    each block's count bounded as :func:`read_blocks` bounds it."""
    records: list[Any] = []
    for block in fastavro.block_reader(container):
        size = len(block.bytes_.getbuffer())  # type: ignore[attr-defined]
        check_count(block.num_records, size, min_bytes, block.offset)
        if max_records is not None and len(records) + block.num_records > max_records:
            raise ValueError(f"the file holds more than the {max_records} records expected")
        records.extend(block)
    return records


def check_count(count: int, size: int, min_bytes: int, at: int) -> None:
    if count > size // min_bytes:
        raise ValueError(
            f"the block at byte {at} claims {count} records, its {size} bytes hold at most "
            f"{size // min_bytes} (a record takes at least {min_bytes} bytes)"
        )


def inflate(codec: str, block: bytes, at: int) -> bytes:
    """``block`` decompressed, stopping one byte past :func:`inflate_limit`."""
    if codec == "null":
        return block
    limit = inflate_limit(len(block))
    if codec == "zstandard":
        out, complete = _zstd(block, limit + 1), True
    else:
        decompressor = _DECOMPRESSORS[codec]()
        out = decompressor.decompress(block, limit + 1)
        complete = decompressor.eof
    if len(out) > limit:
        raise ValueError(
            f"the {codec} block at byte {at} ({len(block)} bytes) inflates past {limit} "
            f"bytes, more than a block may ({INFLATE_RATIO} times its size, at least "
            f"{INFLATE_FLOOR >> 20} MiB, at most {INFLATE_CAP >> 20} MiB)"
        )
    if not complete:
        raise ValueError(f"the {codec} block at byte {at} is truncated")
    return bytes(out)


def _zstd(block: bytes, most: int) -> bytes:
    import zstandard

    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(block)) as reader:
        while len(out) < most:
            chunk = reader.read(most - len(out))
            if not chunk:
                break
            out += chunk
    return bytes(out)


def _read_long(stream: io.BytesIO) -> int:
    """One zig-zag varint long (at most 10 bytes)."""
    shift = result = 0
    for _ in range(_MAX_VARINT_BYTES):
        byte = stream.read(1)
        if not byte:
            raise ValueError("unexpected end of file in a block header")
        b = byte[0]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7
    raise ValueError(f"a block header's varint runs past {_MAX_VARINT_BYTES} bytes")


def min_record_bytes(schema: Any) -> int:
    """The fewest bytes one record of ``schema`` (fastavro-parsed) takes; ValueError
    when that is none, or when an array's items can take none."""
    named = schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}
    least = _min_bytes(schema, named, frozenset())
    if least == 0:
        raise ValueError("the writer schema's records take no bytes")
    return least


def _min_bytes(schema: Any, named: dict[str, Any], seen: frozenset[str]) -> int:
    """A lower bound of the bytes a value of ``schema`` takes. A named type met inside
    itself counts 1: it is reachable only through a union or an array (at least a byte
    each) or not encodable at all."""
    if isinstance(schema, str):
        if schema in _PRIMITIVE_BYTES:
            return _PRIMITIVE_BYTES[schema]
        if schema in seen:
            return 1
        return _min_bytes(named[schema], named, seen | {schema})
    if isinstance(schema, list):
        return 1 + min(_min_bytes(s, named, seen) for s in schema)
    kind = schema["type"]
    if kind in ("record", "error"):
        inner = seen | {schema["name"]}
        return sum(_min_bytes(f["type"], named, inner) for f in schema["fields"])
    if kind == "array":
        if _min_bytes(schema["items"], named, seen) == 0:
            raise ValueError("the writer schema has an array whose items take no bytes")
        return 1
    if kind == "map":
        _min_bytes(schema["values"], named, seen)  # the arrays inside are checked too
        return 1
    if kind == "fixed":
        return int(schema["size"])
    if kind == "enum":
        return 1
    return _min_bytes(kind, named, seen)  # {"type": "long", "logicalType": ...}
