"""What a CDC writer does with each row of a batch, decided for the whole batch at once.

Semantics (Flink's BaseDeltaTaskWriter over BaseEqualityDeltaWriter):

- ``+I``/``+U`` insert the row; in upsert mode they first delete the key.
- ``-U``/``-D`` delete the row; in upsert mode ``-U`` is ignored and ``-D`` deletes the key.
- A delete (or an insert, which replaces) of a key whose latest row was inserted earlier
  by the same writer is a POSITION delete of that row; otherwise a delete is an
  EQUALITY delete, and an insert outside upsert mode deletes nothing.

Invariants:
- The result equals applying the rows one by one in batch order (tests check it against
  such a loop); only ``key_values`` materializes Python objects, and only for the rows
  whose key state must be looked up or remembered across batches.
- Positions are opaque non-negative integers chosen by the caller; -1 means "absent".
- No position is deleted twice: a position leaves the key state when it is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import MissingColumnError, NullKeyError, UnknownRowKindError
from stream_sink.lookup.key_values import to_numpy

DEFAULT_ROW_KIND_COLUMN = "_row_kind"
ROW_KINDS = ("+I", "-U", "+U", "-D")  # code = index, as Flink's RowKind byte value

OP_SKIP, OP_INSERT, OP_DELETE = 0, 1, 2
_OPS_UPSERT = np.array([OP_INSERT, OP_SKIP, OP_INSERT, OP_DELETE], dtype=np.int8)
_OPS_CHANGELOG = np.array([OP_INSERT, OP_DELETE, OP_INSERT, OP_DELETE], dtype=np.int8)


# --- input checks --------------------------------------------------------------------


def require_columns(batch: pa.Table, names: Sequence[str], role: str, where: str) -> None:
    """Raise MissingColumnError naming the first of ``names`` that ``batch`` lacks."""
    for name in names:
        if name not in batch.column_names:
            raise MissingColumnError(
                f"{where}: the {role} column {name!r} is missing from the batch "
                f"(columns: {batch.column_names})"
            )


def decode_row_kinds(column: pa.ChunkedArray | pa.Array, name: str, where: str) -> np.ndarray:
    """Row kind codes (index into ROW_KINDS) as int8; unknown or null kinds are refused."""
    values = column
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if not (
        pa.types.is_string(values.type)
        or pa.types.is_large_string(values.type)
        or pa.types.is_string_view(values.type)
    ):
        raise UnknownRowKindError(
            f"{where}: row kind column {name!r} must hold strings {ROW_KINDS}, "
            f"got type {column.type}"
        )
    codes = pc.index_in(values, value_set=pa.array(ROW_KINDS, type=values.type))
    if codes.null_count:
        row = int(pc.index(codes.is_null(), True).as_py())
        raise UnknownRowKindError(
            f"{where}: unknown row kind {values[row].as_py()!r} in column {name!r} at row {row}; "
            f"expected one of {ROW_KINDS}"
        )
    return np.asarray(to_numpy(codes), dtype=np.int8)


def check_no_null_keys(batch: pa.Table, key_names: Sequence[str], where: str) -> None:
    """Raise NullKeyError naming the first key column holding a null and its row."""
    for name in key_names:
        column = batch.column(name)
        if column.null_count:
            row = int(pc.index(column.is_null(), True).as_py())
            raise NullKeyError(f"{where}: equality field {name!r} is null at row {row}")


def ops_for(kinds: np.ndarray, upsert: bool) -> np.ndarray:
    """OP_INSERT / OP_DELETE / OP_SKIP per row for row kind codes."""
    return (_OPS_UPSERT if upsert else _OPS_CHANGELOG)[kinds]


# --- the plan ------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyLinks:
    """For each row, the previous row with the same key (-1: none) and whether it is the
    last; per distinct key, its first row (``firsts``) and its last row (``lasts``,
    aligned with ``firsts``)."""

    previous: np.ndarray
    is_last: np.ndarray
    firsts: np.ndarray
    lasts: np.ndarray


def link_keys(ids: np.ndarray, distinct: int) -> KeyLinks:
    """Links of the rows' keys (``ids`` equal exactly for equal keys; ``distinct``: the
    number of keys, -1 when unknown). Repeated keys are found with one unstable sort;
    only the rows of repeated keys, usually few, are then sorted stably to link them."""
    n = len(ids)
    rows = np.arange(n, dtype=np.int64)
    previous = np.full(n, -1, dtype=np.int64)
    is_last = np.ones(n, dtype=bool)
    repeated = _repeated_values(ids) if distinct != n and n > 1 else ids[:0]
    if not len(repeated):
        return KeyLinks(previous, is_last, rows, rows)
    sub = np.flatnonzero(np.isin(ids, repeated))
    order = sub[np.argsort(ids[sub], kind="stable")]
    same = ids[order[1:]] == ids[order[:-1]]
    previous[order[1:][same]] = order[:-1][same]
    is_last[order[:-1][same]] = False
    firsts = np.flatnonzero(previous < 0)
    lasts = firsts.copy()
    group_firsts = order[np.concatenate(([True], ~same))]
    lasts[np.searchsorted(firsts, group_firsts)] = order[np.concatenate((~same, [True]))]
    return KeyLinks(previous, is_last, firsts, lasts)


def _repeated_values(ids: np.ndarray) -> np.ndarray:
    """The values occurring more than once in ``ids`` (each once)."""
    ordered = np.sort(ids)
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    return np.unique(twice) if len(twice) > 1 else twice


@dataclass(frozen=True)
class ChangePlan:
    """Row indices are into the planned rows; insert ordinals index ``inserts``.

    - ``inserts``: rows written as data, in order.
    - ``equality_deletes``: rows whose key (upsert) or full row goes to an equality delete.
    - ``deleted_known``: earlier positions (from before the batch) to position-delete.
    - ``deleted_inserts``: insert ordinals of this batch's rows to position-delete.
    - ``kept_rows``/``kept_inserts``: the last insert of each key that stays live (remember).
    - ``dropped_rows``: rows whose key ends deleted (forget).
    - ``final_inserts``: per key, aligned with ``KeyLinks.firsts``, the insert ordinal of
      its last row when that row is an insert (the key stays live there), else -1.
    """

    inserts: np.ndarray
    equality_deletes: np.ndarray
    deleted_known: np.ndarray
    deleted_inserts: np.ndarray
    kept_rows: np.ndarray
    kept_inserts: np.ndarray
    dropped_rows: np.ndarray
    final_inserts: np.ndarray


def plan_changes(ops: np.ndarray, links: KeyLinks, known: np.ndarray, upsert: bool) -> ChangePlan:
    """The plan for rows whose ops are OP_INSERT or OP_DELETE (no OP_SKIP).

    ``known[i]`` is the position of the live row of row i's key from before the batch
    (-1: none); it is read only for rows without a previous row in the batch.
    """
    is_insert = ops == OP_INSERT
    ordinal = np.cumsum(is_insert, dtype=np.int64) - 1
    first = links.previous < 0
    prev = np.where(first, 0, links.previous)
    live_in_batch = ~first & is_insert[prev]
    live_before = first & (known >= 0)
    deletes_key = ~is_insert | upsert
    equality = deletes_key & ~live_in_batch & ~live_before
    kept = links.is_last & is_insert
    return ChangePlan(
        inserts=np.flatnonzero(is_insert),
        equality_deletes=np.flatnonzero(equality),
        deleted_known=known[live_before],
        deleted_inserts=ordinal[prev[live_in_batch]],
        kept_rows=np.flatnonzero(kept),
        kept_inserts=ordinal[kept],
        dropped_rows=np.flatnonzero(links.is_last & ~is_insert),
        final_inserts=np.where(is_insert[links.lasts], ordinal[links.lasts], -1),
    )
