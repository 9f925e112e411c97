"""The live keys of a delta writer: key -> position of its live row, in NumPy arrays.

A key is reduced to a 64-bit fingerprint per row, vectorized over a batch:

- one integer-like column (ints, dates, times, timestamps): the value itself as int64,
  exact, so an entry costs 16 bytes (fingerprint + position);
- any other key (strings, binary, decimals, several columns): a 64-bit hash of the
  values. Distinct keys may then share a fingerprint, so every entry also keeps a
  reference to a copy of its key values and a fingerprint match counts only after
  the real values compare equal (collision handling).

Entries live in runs sorted by fingerprint, each at most a quarter of the one before
(a log-structured merge): new keys form a new run, and the two newest runs merge while
the newer one holds at least a quarter of the older one's entries. So each entry is
copied O(log n) times, a lookup is one ``searchsorted`` per run (O(log n) runs), and
deleted entries are dropped when they reach half of all entries (compaction).

Invariants:
- A real key has at most one entry across all runs; entries with equal fingerprints
  are adjacent in their run. A deleted key keeps its entry with position -1 (found
  again when re-inserted) until the next compaction drops it.
- Positions are non-negative; -1 means absent everywhere in the API.
- Rows passed to :meth:`KeyIndex.remember` in one call hold distinct keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

Column: TypeAlias = pa.ChunkedArray | pa.Array

_NONE = np.empty(0, dtype=np.int64)
_MIX = np.uint64(0x9E3779B97F4A7C15)
_MIN_COMPACT = 4096


@dataclass
class _Run:
    """Entries sorted by fingerprint; ``ref`` indexes the stored key values (hashed keys)."""

    fp: np.ndarray
    pos: np.ndarray
    ref: np.ndarray

    @staticmethod
    def empty() -> _Run:
        return _Run(_NONE, _NONE, _NONE)

    @property
    def nbytes(self) -> int:
        return int(self.fp.nbytes + self.pos.nbytes + self.ref.nbytes)


class KeyIndex:
    """Maps keys (rows of key columns) to int64 positions; see the module invariants.

    ``hash_bits`` narrows hashed fingerprints (and makes integer keys hashed too when
    below 64); only tests use it, to force collisions.
    """

    def __init__(self, hash_bits: int = 64) -> None:
        if not 1 <= hash_bits <= 64:
            raise ValueError(f"hash_bits must be in [1, 64], got {hash_bits}")
        self._bits = hash_bits
        self._exact: bool | None = None
        self._runs: list[_Run] = []
        self._deleted = 0
        self._stored: pa.Table | None = None

    def __len__(self) -> int:
        """Entries held, deleted ones included until compaction."""
        return sum(len(r.fp) for r in self._runs)

    @property
    def live(self) -> int:
        """Keys with a position (deleted entries not counted)."""
        return len(self) - self._deleted

    @property
    def nbytes(self) -> int:
        """Bytes held by the index arrays and the stored key values."""
        stored = self._stored.nbytes if self._stored is not None else 0
        return sum(r.nbytes for r in self._runs) + stored

    def lookup(self, keys: Sequence[Column], rows: np.ndarray) -> np.ndarray:
        """Position of the key of each of ``rows`` (-1: absent)."""
        out = np.full(len(rows), -1, dtype=np.int64)
        if not len(self) or not len(rows):
            return out
        fp = self._fingerprints(keys, rows)
        order = np.argsort(fp)
        for run in self._runs:
            at = self._find(run, fp, order, keys, rows)
            hit = at >= 0
            out[hit] = run.pos[at[hit]]
        return out

    def forget(self, keys: Sequence[Column], rows: np.ndarray) -> None:
        """Delete the keys of ``rows`` (absent ones are ignored)."""
        if not len(self) or not len(rows):
            return
        fp = self._fingerprints(keys, rows)
        order = np.argsort(fp)
        for run in self._runs:
            at = self._find(run, fp, order, keys, rows)
            at = at[at >= 0]
            self._deleted += int(np.count_nonzero(run.pos[at] >= 0))
            run.pos[at] = -1
        if self._deleted > len(self) // 2 and len(self) >= _MIN_COMPACT:
            self._compact()

    def remember(self, keys: Sequence[Column], rows: np.ndarray, positions: np.ndarray) -> None:
        """Set the position of the key of each of ``rows`` (distinct keys) to ``positions``."""
        if not len(rows):
            return
        fp = self._fingerprints(keys, rows)
        new = np.ones(len(rows), dtype=bool)
        order = np.argsort(fp)
        for run in self._runs:
            at = self._find(run, fp, order, keys, rows)
            hit = at >= 0
            self._deleted -= int(np.count_nonzero(run.pos[at[hit]] < 0))
            run.pos[at[hit]] = positions[hit]
            new &= ~hit
        if new.any():
            self._add(fp[new], positions[new], keys, rows[new])

    def clear(self) -> None:
        self._runs, self._deleted, self._stored = [], 0, None

    # --- internals ---------------------------------------------------------------------

    def _find(
        self,
        run: _Run,
        fp: np.ndarray,
        order: np.ndarray,
        keys: Sequence[Column],
        rows: np.ndarray,
    ) -> np.ndarray:
        """Index in ``run`` of the entry of each row's key (-1: none); ``order`` sorts ``fp``."""
        found = np.full(len(fp), -1, dtype=np.int64)
        if not len(run.fp):
            return found
        left = _search(run.fp, fp, order, "left")
        if self._exact:
            inside = left < len(run.fp)
            hit = inside & (run.fp[np.minimum(left, len(run.fp) - 1)] == fp)
            found[hit] = left[hit]
            return found
        count = _search(run.fp, fp, order, "right") - left
        todo = np.flatnonzero(count > 0)
        step = 0
        while len(todo):  # the k-th entry of each matching fingerprint, k = 0, 1, ...
            candidates = left[todo] + step
            same = self._same_keys(run.ref[candidates], keys, rows[todo])
            found[todo[same]] = candidates[same]
            step += 1
            todo = todo[~same & (count[todo] > step)]
        return found

    def _same_keys(self, refs: np.ndarray, keys: Sequence[Column], rows: np.ndarray) -> np.ndarray:
        assert self._stored is not None
        same = np.ones(len(rows), dtype=bool)
        ref_array, row_array = pa.array(refs, pa.int64()), pa.array(rows, pa.int64())
        for i, column in enumerate(keys):
            stored = self._stored.column(i).take(ref_array)
            equal = pc.equal(stored, column.take(row_array))
            same &= np.asarray(_numpy(equal), dtype=bool)
        return same

    def _add(
        self, fp: np.ndarray, pos: np.ndarray, keys: Sequence[Column], rows: np.ndarray
    ) -> None:
        ref = _NONE
        if not self._exact:
            start = self._stored.num_rows if self._stored is not None else 0
            ref = np.arange(start, start + len(rows), dtype=np.int64)
            taken = pa.table(
                [c.take(pa.array(rows, pa.int64())) for c in keys],
                names=[str(i) for i in range(len(keys))],
            )
            stored = self._stored
            self._stored = taken if stored is None else pa.concat_tables([stored, taken])
        runs = self._runs
        runs.append(_merge([_Run(fp, pos.astype(np.int64), ref)], self._exact))
        while len(runs) > 1 and len(runs[-1].fp) * 4 >= len(runs[-2].fp):
            newer = runs.pop()
            runs[-1] = _insert(runs[-1], newer, self._exact)

    def _compact(self) -> None:
        """One ``main`` run without deleted entries; stored key values rewritten to match."""
        merged = _Run.empty()
        for newer in self._runs:
            merged = _insert(merged, newer, self._exact)
        live = merged.pos >= 0
        ref = merged.ref[live] if len(merged.ref) else _NONE
        run = _Run(merged.fp[live], merged.pos[live], ref)
        if not self._exact and self._stored is not None:
            self._stored = self._stored.take(pa.array(run.ref, pa.int64())).combine_chunks()
            run.ref = np.arange(len(run.fp), dtype=np.int64)
        self._runs, self._deleted = [run], 0

    def _fingerprints(self, keys: Sequence[Column], rows: np.ndarray) -> np.ndarray:
        if self._exact is None:
            self._exact = self._bits == 64 and len(keys) == 1 and _integer_like(keys[0].type)
        taken = [c.take(pa.array(rows, pa.int64())) for c in keys]
        if self._exact:
            return _as_int64(taken[0])
        hashed: np.ndarray | None = None
        for column in taken:
            h = _hash64(column)
            hashed = h if hashed is None else (hashed * _MIX) ^ h
        assert hashed is not None
        if self._bits < 64:
            hashed &= np.uint64((1 << self._bits) - 1)
        return hashed.view(np.int64)


def _merge(runs: Sequence[_Run], exact: bool | None) -> _Run:
    """Runs concatenated and stably sorted by fingerprint (equal ones stay adjacent)."""
    nonempty = [r for r in runs if len(r.fp)]
    if not nonempty:
        return _Run.empty()
    fp = np.concatenate([r.fp for r in nonempty])
    order = np.argsort(fp, kind="stable")
    pos = np.concatenate([r.pos for r in nonempty])[order]
    ref = _NONE if exact else np.concatenate([r.ref for r in nonempty])[order]
    return _Run(fp[order], pos, ref)


def _search(
    sorted_fp: np.ndarray, fp: np.ndarray, order: np.ndarray, side: Literal["left", "right"]
) -> np.ndarray:
    """``searchsorted`` of the queries in sorted ``order`` (far fewer cache misses)."""
    at = np.empty(len(fp), dtype=np.int64)
    at[order] = np.searchsorted(sorted_fp, fp[order], side=side)
    return at


def _insert(run: _Run, new: _Run, exact: bool | None) -> _Run:
    """Sorted ``new`` entries merged into sorted ``run`` in one pass (after equal ones)."""
    if not len(run.fp):
        return new
    at = np.searchsorted(run.fp, new.fp, side="right")
    ref = _NONE if exact else np.insert(run.ref, at, new.ref)
    return _Run(np.insert(run.fp, at, new.fp), np.insert(run.pos, at, new.pos), ref)


def _integer_like(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_temporal(t)) and not pa.types.is_interval(t)


def _as_int64(column: Column) -> np.ndarray:
    t = column.type
    if pa.types.is_uint64(t):
        return np.asarray(_numpy(column), dtype=np.uint64).view(np.int64)
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        column = column.cast(pa.int32())
    elif not pa.types.is_integer(t):
        column = column.cast(pa.int64())
    return np.asarray(_numpy(column), dtype=np.int64)


def _hash64(column: Column) -> np.ndarray:
    """Equal values -> equal uint64 (pandas' vectorized SipHash / integer mixer)."""
    if _integer_like(column.type):
        values: np.ndarray = _as_int64(column)
    else:
        values = np.asarray(_numpy(column), dtype=object)
    return np.asarray(pd.util.hash_array(values, categorize=False), dtype=np.uint64)


def _numpy(column: Column) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_numpy(zero_copy_only=False)
