"""Key -> (file, row) of every live row of a table: the index both formats' positions
commits look a batch's keys up in.

A row is stored as one int64, ``file ordinal << ROW_BITS | row``; files are numbered in
the order they are first named and kept by their path, so a file given a new deletion
vector (Delta re-adds it) keeps its ordinal. The first live row of each key sits in the
:class:`~stream_sink.lookup.key_index.KeyIndex` hash table (~29 bytes per integer key);
further live rows of a key already held (only when another writer appended duplicates)
are kept aside in a dict and leave with it.

Invariants:
- A key has at most one entry in the hash table; every live row the index was given is
  either that entry or kept aside under its key.
- :meth:`RowPositions.take` returns every row held for the keys asked and forgets them:
  a key taken is absent until it is added again.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa

from .key_index import Column, KeyIndex
from .key_values import dense_key_ids, key_values

ROW_BITS = 40
"""An entry is ``file ordinal << ROW_BITS | row``: files of up to 2^40 rows."""
ROW_MASK = (1 << ROW_BITS) - 1
NONE = np.empty(0, dtype=np.int64)

File = TypeVar("File")


class RowPositions(Generic[File]):
    """Key -> encoded (file, row) of live rows; ``File`` is the format's file entry."""

    def __init__(self) -> None:
        self.files: list[File] = []
        self._ordinal: dict[str, int] = {}
        self._keys = KeyIndex()
        self._extra: dict[Hashable, list[int]] = {}

    @property
    def live(self) -> int:
        return self._keys.live + sum(len(v) for v in self._extra.values())

    @property
    def nbytes(self) -> int:
        """Bytes of the hash table (the per-key cost; file entries are per file)."""
        return self._keys.nbytes

    def ordinal(self, path: str, f: File) -> int:
        """The ordinal of the file at ``path``, now described by ``f`` (a new one is
        numbered next)."""
        ordinal = self._ordinal.get(path)
        if ordinal is None:
            ordinal = self._ordinal[path] = len(self.files)
            self.files.append(f)
        else:
            self.files[ordinal] = f
        return ordinal

    def add(self, path: str, f: File, columns: Sequence[Column], live: np.ndarray) -> None:
        """Remember rows ``live`` of the file at ``path`` (``columns``: its key columns,
        every row of the file)."""
        if not len(live):
            self.ordinal(path, f)
            return
        cols = [c.take(pa.array(live, type=pa.int64())) for c in columns]
        self.add_rows(path, f, cols, live)

    def add_rows(self, path: str, f: File, cols: Sequence[Column], live: np.ndarray) -> None:
        """Remember rows ``live`` of the file at ``path``, ``cols`` their key values (one
        per row of ``live``)."""
        ordinal = self.ordinal(path, f)
        if not len(live):
            return
        encoded = (np.int64(ordinal) << ROW_BITS) | live.astype(np.int64)
        first = first_rows(cols)
        known = self._keys.lookup(cols, first) >= 0
        self._keys.remember(cols, first[~known], encoded[first[~known]])
        extra = np.ones(len(live), dtype=bool)
        extra[first[~known]] = False
        rows = np.flatnonzero(extra)
        for key, e in zip(key_values(cols, rows), encoded[rows].tolist(), strict=True):
            self._extra.setdefault(key, []).append(e)

    def entry(self, path: str) -> File | None:
        """The file entry of ``path`` (None: never named)."""
        ordinal = self._ordinal.get(path)
        return None if ordinal is None else self.files[ordinal]

    def drop_rows(self, path: str, cols: Sequence[Column], rows: np.ndarray) -> bool:
        """Forget rows ``rows`` of the file at ``path`` (``cols``: their key values, one
        per row), as another writer's delete or compaction removes them: a key whose
        entry is another row keeps it. False, having changed nothing, when this cannot
        be done exactly (the file was never named, rows are kept aside for duplicate
        keys, or a key repeats among ``rows``): the caller rebuilds the index."""
        ordinal = self._ordinal.get(path)
        if ordinal is None or self._extra:
            return False
        if not len(rows):
            return True
        first = first_rows(cols)
        if len(first) != len(rows):
            return False
        encoded = (np.int64(ordinal) << ROW_BITS) | rows.astype(np.int64)
        mine = self._keys.lookup(cols, first) == encoded[first]
        self._keys.forget(cols, first[mine])
        return True

    def take(self, columns: Sequence[Column]) -> np.ndarray:
        """The encoded positions of the live rows of the keys in ``columns`` (any
        repeats), which leave the index."""
        if not len(columns[0]):
            return NONE
        first = first_rows(columns)
        encoded = self._keys.lookup(columns, first)
        hit = encoded >= 0
        self._keys.forget(columns, first[hit])
        found = [encoded[hit]]
        if self._extra:
            for key in key_values(columns, first):
                found.append(np.asarray(self._extra.pop(key, []), dtype=np.int64))
        return np.concatenate(found)

    def file(self, encoded: int) -> File:
        return self.files[encoded >> ROW_BITS]


def by_file(encoded: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Encoded positions grouped per file ordinal: (ordinal, its rows), ordinals ascending."""
    ordinals = encoded >> ROW_BITS
    return [(int(o), encoded[ordinals == o] & ROW_MASK) for o in np.unique(ordinals)]


def first_rows(columns: Sequence[Column]) -> np.ndarray:
    """The first row of each distinct key of ``columns``, ascending."""
    ids, _ = dense_key_ids(columns)
    _, first = np.unique(ids, return_index=True)
    return np.sort(first).astype(np.int64)
