"""The live keys of a CDC writer: key -> position of its live row, in NumPy arrays.

A key is reduced to a 64-bit fingerprint per row, vectorized over a batch:

- one integer-like column (ints, dates, times, timestamps): the value itself as int64,
  exact, so a slot costs 16 bytes (fingerprint + position);
- any other key (strings, binary, decimals, several columns): a 64-bit hash of the
  values. Distinct keys may then share a fingerprint, so every entry also keeps a
  reference to a copy of its key values and a fingerprint match counts only after
  the real values compare equal (collision handling).

Entries live in an open-addressing hash table (linear probing) of parallel arrays,
probed for a whole batch at once: each step advances every unresolved row by one slot.
The CDC writer probes each key of a batch once (:meth:`KeyIndex.find`), reads the
positions from that probe and then sets each key's final position through it
(:meth:`KeyIndex.settle`); a probe made before a rebuild is probed again.
The table is rebuilt (deleted entries dropped) when its entries would pass 3/4 of its
slots, to ``_GROW`` slots per live key (16 x 1.8 = 28.8 bytes per integer key, fewer
as the table fills), and when deleted entries pass half of all.

Invariants:
- A real key has at most one entry. An empty slot has position ``_EMPTY`` (-2); a
  deleted key keeps its entry with position -1 (found again when re-inserted) until the
  next rebuild drops it, so slots never become empty and probe chains stay unbroken.
- Entries never exceed 3/4 of the slots, so every probe ends at an empty slot.
- Positions are non-negative; -1 means absent everywhere in the API.
- Rows passed to :meth:`KeyIndex.remember` in one call hold distinct keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

Column: TypeAlias = pa.ChunkedArray | pa.Array

_NONE = np.empty(0, dtype=np.int64)
_MIX = np.uint64(0x9E3779B97F4A7C15)
_EMPTY = -2
_MIN_SLOTS = 64
_MIN_COMPACT = 4096
_GROW = 1.8  # slots per live key after a rebuild (16 x 1.8 = 28.8 B per integer key)
_MAX_LOAD = 0.75


@dataclass(frozen=True)
class Probe:
    """Where the keys of ``rows`` (distinct keys) stand in a :class:`KeyIndex`: per row its
    fingerprint, and the slot of its entry (``found``) or the empty slot ending its
    chain. Valid while the index keeps its ``generation`` (no rebuild since)."""

    rows: np.ndarray
    fp: np.ndarray
    slot: np.ndarray
    found: np.ndarray
    generation: int


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
        self._generation = 0
        self.clear()

    def __len__(self) -> int:
        """Entries held, deleted ones included until the next rebuild."""
        return self._used

    @property
    def live(self) -> int:
        """Keys with a position (deleted entries not counted)."""
        return self._used - self._deleted

    @property
    def nbytes(self) -> int:
        """Bytes held by the table arrays and the stored key values."""
        stored = self._stored.nbytes if self._stored is not None else 0
        return int(self._fp.nbytes + self._pos.nbytes + self._ref.nbytes) + stored

    def lookup(self, keys: Sequence[Column], rows: np.ndarray) -> np.ndarray:
        """Position of the key of each of ``rows`` (-1: absent)."""
        return self.positions(self.find(keys, rows))

    def forget(self, keys: Sequence[Column], rows: np.ndarray) -> None:
        """Delete the keys of ``rows`` (distinct keys; absent ones are ignored)."""
        self.settle(keys, self.find(keys, rows), np.full(len(rows), -1, dtype=np.int64))

    def remember(self, keys: Sequence[Column], rows: np.ndarray, positions: np.ndarray) -> None:
        """Set the position of the key of each of ``rows`` (distinct keys) to ``positions``."""
        self.settle(keys, self.find(keys, rows), positions)

    def find(self, keys: Sequence[Column], rows: np.ndarray) -> Probe:
        """Probe the keys of ``rows`` (distinct keys) once, for :meth:`positions` and
        :meth:`settle` (a batch's keys are probed once instead of once per call)."""
        fp = self._fingerprints(keys, rows)
        if not len(self._pos) or not len(rows):
            none = np.zeros(len(rows), dtype=bool)
            return Probe(rows, fp, np.zeros(len(rows), dtype=np.int64), none, self._generation)
        slot, found = self._probe(fp, keys, rows)
        return Probe(rows, fp, slot, found, self._generation)

    def positions(self, probe: Probe) -> np.ndarray:
        """Position of each probed key (-1: absent)."""
        out = np.full(len(probe.rows), -1, dtype=np.int64)
        out[probe.found] = self._pos[probe.slot[probe.found]]
        return out

    def settle(self, keys: Sequence[Column], probe: Probe, positions: np.ndarray) -> None:
        """Set each probed key's position to ``positions`` (-1: delete the key); ``keys``
        are the columns the probe was made from."""
        if probe.generation != self._generation:
            probe = self.find(keys, probe.rows)
        found, slot = probe.found, probe.slot
        hit, now = slot[found], positions[found]
        before = self._pos[hit]
        self._deleted += int(np.count_nonzero((before >= 0) & (now < 0)))
        self._deleted -= int(np.count_nonzero((before < 0) & (now >= 0)))
        self._pos[hit] = now
        new = ~found & (positions >= 0)
        count = int(np.count_nonzero(new))
        crowded = self._used + count > _MAX_LOAD * len(self._pos)
        if crowded or (self._deleted > self._used // 2 and self._used >= _MIN_COMPACT):
            self._rebuild(count)
            slot = _home(probe.fp, len(self._pos))
        if count:
            fp, pos = probe.fp[new], positions[new].astype(np.int64)
            self._place(fp, pos, slot[new], keys, probe.rows[new])

    def clear(self) -> None:
        self._fp, self._pos, self._ref = _NONE, _NONE, _NONE
        self._used, self._deleted = 0, 0
        self._generation += 1
        self._stored: pa.Table | None = None

    # --- internals ---------------------------------------------------------------------

    def _probe(
        self, fp: np.ndarray, keys: Sequence[Column], rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the slot of its key's entry (found) or the empty slot ending its chain."""
        slots = len(self._pos)
        slot = _home(fp, slots)
        found = np.zeros(len(fp), dtype=bool)
        todo = np.arange(len(fp))
        while len(todo):
            at = slot[todo]
            pos = self._pos[at]
            empty = pos == _EMPTY
            match = ~empty & (self._fp[at] == fp[todo])
            if not self._exact and match.any():
                m = np.flatnonzero(match)
                match[m] = self._same_keys(self._ref[at[m]], keys, rows[todo[m]])
            found[todo[match]] = True
            go_on = ~(empty | match)
            todo, at = todo[go_on], at[go_on] + 1
            at[at == slots] = 0
            slot[todo] = at
        return slot, found

    def _place(
        self,
        fp: np.ndarray,
        pos: np.ndarray,
        slot: np.ndarray,
        keys: Sequence[Column],
        rows: np.ndarray,
    ) -> None:
        """New entries (distinct keys, none in the table) from ``slot``, the chains' ends."""
        ref = self._store(keys, rows)
        self._fill(fp, pos, ref, slot)

    def _fill(self, fp: np.ndarray, pos: np.ndarray, ref: np.ndarray, slot: np.ndarray) -> None:
        """Each entry into the first empty slot from its ``slot`` on. Entries reaching one
        empty slot at the same step claim it by writing their (negative) claim code into
        it; the one whose code stays there wins and the others probe on (no sort)."""
        slots = len(self._pos)
        todo = np.arange(len(fp))
        slot = slot.copy()
        while len(todo):
            at = slot[todo]
            free = np.flatnonzero(self._pos[at] == _EMPTY)
            claimed, claim = at[free], _EMPTY - 1 - free
            self._pos[claimed] = claim  # repeated slots: one claim stays
            won = self._pos[claimed] == claim
            win, where = todo[free[won]], claimed[won]
            self._fp[where], self._pos[where] = fp[win], pos[win]
            if not self._exact:
                self._ref[where] = ref[win]
            placed = np.zeros(len(todo), dtype=bool)
            placed[free[won]] = True
            todo, at = todo[~placed], at[~placed] + 1
            at[at == slots] = 0
            slot[todo] = at
        self._used += len(fp)

    def _store(self, keys: Sequence[Column], rows: np.ndarray) -> np.ndarray:
        """Copies of the key values of ``rows`` (hashed keys only) and their references."""
        if self._exact:
            return _NONE
        start = self._stored.num_rows if self._stored is not None else 0
        taken = pa.table(
            [c.take(pa.array(rows, pa.int64())) for c in keys],
            names=[str(i) for i in range(len(keys))],
        )
        stored = self._stored
        self._stored = taken if stored is None else pa.concat_tables([stored, taken])
        return np.arange(start, start + len(rows), dtype=np.int64)

    def _rebuild(self, incoming: int) -> None:
        """A new table of live entries only, with room for ``incoming`` more.

        The old arrays are dropped before the new ones are made (the peak holds the live
        entries twice, not two tables). Entries are placed in home order; the old table
        is nearly in that order already (home order is the same for every table size),
        so the stable sort is cheap, and skipped when the order is exact."""
        keep = self._pos >= 0
        fp, pos = self._fp[keep], self._pos[keep]
        ref = _NONE
        if not self._exact and self._stored is not None:
            self._stored = self._stored.take(pa.array(self._ref[keep], pa.int64()))
            self._stored = self._stored.combine_chunks()
            ref = np.arange(len(fp), dtype=np.int64)
        del keep
        self._fp, self._pos, self._ref = _NONE, _NONE, _NONE
        slots = max(_MIN_SLOTS, int((len(fp) + incoming) * _GROW))
        self._used, self._deleted = 0, 0
        self._generation += 1
        slot = _home(fp, slots)
        if len(slot) > 1 and bool(np.any(slot[1:] < slot[:-1])):
            order = np.argsort(slot, kind="stable")
            slot, fp, pos = slot[order], fp[order], pos[order]
            ref = ref[order] if len(ref) else ref
            del order
        # into an empty table in home order, entry i lands at max(home_i, slot_{i-1} + 1):
        # increasing, so the entries that fit before the end are a prefix
        rank = np.arange(len(slot), dtype=np.int64)
        slot -= rank
        np.maximum.accumulate(slot, out=slot)
        slot += rank
        del rank
        inside = int(np.searchsorted(slot, slots))
        self._fp = np.zeros(slots, dtype=np.int64)
        self._pos = np.full(slots, _EMPTY, dtype=np.int64)
        self._ref = _NONE if self._exact else np.full(slots, -1, dtype=np.int64)
        at = slot[:inside]
        self._fp[at], self._pos[at] = fp[:inside], pos[:inside]
        if not self._exact:
            self._ref[at] = ref[:inside]
        self._used = inside
        if inside < len(fp):  # wrapped past the last slot: from slot 0 on
            rest_ref = ref[inside:] if len(ref) else ref
            start = np.zeros(len(fp) - inside, dtype=np.int64)
            self._fill(fp[inside:], pos[inside:], rest_ref, start)

    def _same_keys(self, refs: np.ndarray, keys: Sequence[Column], rows: np.ndarray) -> np.ndarray:
        assert self._stored is not None
        same = np.ones(len(rows), dtype=bool)
        ref_array, row_array = pa.array(refs, pa.int64()), pa.array(rows, pa.int64())
        for i, column in enumerate(keys):
            stored = self._stored.column(i).take(ref_array)
            equal = pc.equal(stored, column.take(row_array))
            same &= np.asarray(_numpy(equal), dtype=bool)
        return same

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


def _home(fp: np.ndarray, slots: int) -> np.ndarray:
    """Home slot in ``[0, slots)`` of each fingerprint (Fibonacci hashing, slots < 2**32)."""
    mixed = fp.view(np.uint64) * _MIX
    mixed >>= np.uint64(32)
    mixed *= np.uint64(slots)
    mixed >>= np.uint64(32)
    return mixed.view(np.int64)


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
