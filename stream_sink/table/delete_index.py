"""Which delete files apply to which data file (spec: "Scan Planning").

Rules, with ``d`` the data file's and ``x`` the delete file's data sequence number:

- A position delete file applies when ``d <= x`` and the files share spec and
  partition. When it names one data file (``referenced_data_file``, or equal
  lower and upper bounds on ``file_path``) it is indexed by that path only;
  otherwise the ``file_path`` bounds, when present, narrow it further.
- A deletion vector (v3) applies to the one data file it references when ``d <= x``;
  a data file has at most one (two are refused as damage, naming both), and where one
  applies, position delete files for that data file are left out (the vector
  replaced them when it was written: spec "Deletion Vectors").
- An equality delete file applies when ``d < x`` (strictly: deletes never touch
  rows committed with them) and either its spec is unpartitioned (it applies to
  every partition of every spec) or it shares spec and partition with the data file.
  Like Java's index, one whose key bounds cannot overlap the data file's bounds
  on some equality column (and that holds no null key there) is left out.

The index lives in the table layer because commits use it too: a rewrite refuses
to replace a data file that a concurrent delete may apply to (Java's
``validateNoNewDeletesForDataFiles``).

Invariant: :meth:`DeleteIndex.for_data_file` returns a superset of the delete
files that hold rows of that data file, and never a file the rules exclude.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, UnsupportedError
from stream_sink.table.conversions import from_bytes
from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.types import IcebergType, PrimitiveType, UUIDType

POS_FILE_PATH_ID = 2147483546
POS_POS_ID = 2147483545

PartitionKey = tuple[int, tuple[Any, ...]]


@dataclass
class _BySequence:
    """Delete files sorted by data sequence number, for range lookups."""

    seqs: list[int] = field(default_factory=list)
    files: list[DataFile] = field(default_factory=list)
    _pending: list[tuple[int, DataFile]] = field(default_factory=list)

    def add(self, seq: int, f: DataFile) -> None:
        self._pending.append((seq, f))

    def _sorted(self) -> None:
        if self._pending:
            merged = sorted(
                [*zip(self.seqs, self.files, strict=True), *self._pending], key=lambda p: p[0]
            )
            self.seqs = [s for s, _ in merged]
            self.files = [f for _, f in merged]
            self._pending = []

    def at_or_after(self, seq: int) -> list[DataFile]:
        self._sorted()
        return self.files[bisect.bisect_left(self.seqs, seq) :]

    def after(self, seq: int) -> list[DataFile]:
        self._sorted()
        return self.files[bisect.bisect_right(self.seqs, seq) :]


class DeleteIndex:
    """Live delete files of one snapshot, indexed for lookups by data file."""

    def __init__(
        self, specs: Mapping[int, PartitionSpec], types: Mapping[int, IcebergType] | None = None
    ) -> None:
        """``types``: the type of each field id, to compare equality key bounds."""
        self._specs = specs
        self._types = types or {}
        self._pos_by_path: dict[str, _BySequence] = {}
        self._dv_by_path: dict[str, tuple[int, DataFile]] = {}
        self._pos_by_partition: dict[PartitionKey, _BySequence] = {}
        self._eq_global = _BySequence()
        self._eq_by_partition: dict[PartitionKey, _BySequence] = {}
        self.count = 0

    def add(self, sequence_number: int, f: DataFile) -> None:
        """Index delete file ``f`` whose data sequence number is ``sequence_number``."""
        self.count += 1
        if f.is_deletion_vector:
            self._add_dv(sequence_number, f)
        elif f.content == DataFileContent.POSITION_DELETES:
            path = single_path(f)
            if path is not None:
                self._pos_by_path.setdefault(path, _BySequence()).add(sequence_number, f)
            else:
                self._pos_by_partition.setdefault(_key(f), _BySequence()).add(sequence_number, f)
        elif f.content == DataFileContent.EQUALITY_DELETES:
            if not f.equality_ids:
                raise UnsupportedError(f"equality delete file {f.file_path} has no equality ids")
            spec = self._specs.get(f.spec_id)
            if spec is None:
                raise CorruptMetadataError(
                    f"delete file {f.file_path} names partition spec {f.spec_id}, "
                    "which the table does not have"
                )
            if spec.is_unpartitioned:
                self._eq_global.add(sequence_number, f)
            else:
                self._eq_by_partition.setdefault(_key(f), _BySequence()).add(sequence_number, f)

    def _add_dv(self, sequence_number: int, f: DataFile) -> None:
        path = f.referenced_data_file
        if not path:
            raise CorruptMetadataError(
                f"deletion vector in {f.file_path} has no referenced_data_file"
            )
        old = self._dv_by_path.get(path)
        if old is not None:
            raise CorruptMetadataError(
                f"data file {path} has two deletion vectors in one snapshot (in "
                f"{old[1].file_path} and {f.file_path}); the spec allows one"
            )
        self._dv_by_path[path] = (sequence_number, f)

    def __bool__(self) -> bool:
        return self.count > 0

    def deletion_vector(self, sequence_number: int, f: DataFile) -> DataFile | None:
        """The deletion vector that applies to data file ``f``, if any."""
        found = self._dv_by_path.get(f.file_path)
        if found is None or found[0] < sequence_number:
            return None
        return found[1]

    def for_data_file(self, sequence_number: int, f: DataFile) -> list[DataFile]:
        """The delete files that apply to data file ``f`` of ``sequence_number``."""
        if not self.count:
            return []
        key = _key(f)
        out: list[DataFile] = []
        dv = self.deletion_vector(sequence_number, f)
        if dv is not None:
            out.append(dv)
        else:
            out += self._position_files(sequence_number, f, key)
        eq = self._eq_global.after(sequence_number)
        by_partition = self._eq_by_partition.get(key)
        if by_partition is not None:
            eq = eq + by_partition.after(sequence_number)
        return out + [d for d in eq if self._keys_may_overlap(d, f)]

    def _position_files(
        self, sequence_number: int, f: DataFile, key: PartitionKey
    ) -> list[DataFile]:
        out: list[DataFile] = []
        by_path = self._pos_by_path.get(f.file_path)
        if by_path is not None:
            out += by_path.at_or_after(sequence_number)
        by_partition = self._pos_by_partition.get(key)
        if by_partition is not None:
            out += [d for d in by_partition.at_or_after(sequence_number) if _covers(d, f.file_path)]
        return out

    def _keys_may_overlap(self, delete: DataFile, data: DataFile) -> bool:
        """Whether key bounds may overlap (as Java's ``canContainEqDeletesForFile``,
        more cautious with nulls: a delete that may hold a null key is never skipped)."""
        for fid in delete.equality_ids or ():
            t = self._types.get(fid)
            nulls = (delete.null_value_counts or {}).get(fid)
            if not isinstance(t, PrimitiveType) or nulls is None or nulls > 0:
                continue
            d_lo = decode_bound(t, (delete.lower_bounds or {}).get(fid))
            d_hi = decode_bound(t, (delete.upper_bounds or {}).get(fid))
            f_lo = decode_bound(t, (data.lower_bounds or {}).get(fid))
            f_hi = decode_bound(t, (data.upper_bounds or {}).get(fid))
            try:
                if d_hi is not None and f_lo is not None and d_hi < f_lo:
                    return False
                if d_lo is not None and f_hi is not None and d_lo > f_hi:
                    return False
            except TypeError:
                continue
        return True


def _key(f: DataFile) -> PartitionKey:
    return (f.spec_id, tuple(f.partition))


def _bound(bounds: Mapping[int, bytes] | None) -> bytes | None:
    return (bounds or {}).get(POS_FILE_PATH_ID)


def decode_bound(t: IcebergType, raw: bytes | None) -> Any:
    """A serialized bound as an internal value; None when absent, not comparable
    (uuid, NaN) or undecodable."""
    if raw is None or isinstance(t, UUIDType):
        return None
    try:
        value = from_bytes(t, raw)
    except CorruptMetadataError:
        return None
    return None if isinstance(value, float) and math.isnan(value) else value


def single_path(f: DataFile) -> str | None:
    """The one data file a position delete file names, when it names only one."""
    if f.referenced_data_file:
        return f.referenced_data_file
    lower, upper = _bound(f.lower_bounds), _bound(f.upper_bounds)
    if lower is not None and lower == upper:
        try:
            return lower.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _covers(delete: DataFile, path: str) -> bool:
    """Whether ``path`` lies within the delete file's ``file_path`` bounds."""
    lower, upper = _bound(delete.lower_bounds), _bound(delete.upper_bounds)
    raw = path.encode("utf-8")
    return (lower is None or lower <= raw) and (upper is None or raw <= upper)
