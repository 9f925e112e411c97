"""A Delta Lake table at a location: create, load, read, append, transactions.

Invariants: ``snapshot`` is the newest version this object has seen (``refresh()`` moves
it forward); every change goes through :class:`DeltaTransaction`; creating writes
version 0 put-if-absent, so two creators race safely.

Locations are local paths or ``s3://`` URIs; ``storage_options`` are the FileIO
properties of the store (``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``,
``s3.region``), or ``io`` a FileIO built from them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

import pyarrow as pa

from stream_sink.exceptions import SchemaMismatchError, TableAlreadyExistsError
from stream_sink.io.fileio import FileIO

from .actions import CommitInfo, Metadata
from .column_mapping import MAX_COLUMN_ID, assign_physical
from .conflicts import IsolationLevel
from .features import check_readable, is_feature_key, protocol_for
from .log import DeltaLog
from .replay import load_snapshot, update_snapshot
from .scan import read_snapshot
from .schema import normalize_timestamps, schema_from_arrow, uses_timestamp_ntz
from .snapshot import DeltaSnapshot
from .transaction import DeltaTransaction
from .type_widening import check_type_changes
from .writer import write_data_files


class DeltaTable:
    def __init__(self, log: DeltaLog, snapshot: DeltaSnapshot) -> None:
        self.log = log
        self._snapshot = snapshot

    # --- opening ---------------------------------------------------------------------------

    @staticmethod
    def is_delta_table(location: str, storage_options: Mapping[str, str] | None = None) -> bool:
        try:
            return DeltaLog(location, storage_options=storage_options).exists()
        except Exception:
            return False

    @classmethod
    def load(
        cls,
        location: str,
        version: int | None = None,
        io: FileIO | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> DeltaTable:
        log = DeltaLog(location, io, storage_options)
        snapshot = load_snapshot(log, version)
        where = f"Delta table {log.location}"
        check_readable(snapshot.protocol, where, snapshot.metadata.schema_string)
        check_type_changes(snapshot.metadata.schema_string, where)
        return cls(log, snapshot)

    @classmethod
    def create(
        cls,
        location: str,
        schema: pa.Schema,
        *,
        partition_by: Sequence[str] = (),
        configuration: Mapping[str, str] | None = None,
        name: str | None = None,
        exist_ok: bool = False,
        io: FileIO | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> DeltaTable:
        """Create a table (version 0); an existing table is returned when ``exist_ok``.
        ``delta.feature.<name>=supported`` keys of ``configuration`` add the feature to the
        protocol and are not stored (:func:`~.features.protocol_for`)."""
        log = DeltaLog(location, io, storage_options)
        if log.exists():
            if exist_ok:
                return cls.load(location, io=log.io)
            raise TableAlreadyExistsError(f"a Delta table already exists at {log.location}")
        schema = normalize_timestamps(schema)
        missing = [c for c in partition_by if schema.get_field_index(c) < 0]
        if missing:
            raise SchemaMismatchError(f"partition columns {missing} are not in the schema")
        now = int(time.time() * 1000)
        config = {str(k): str(v) for k, v in (configuration or {}).items()}
        protocol = protocol_for(uses_timestamp_ntz(schema), config)
        config = {k: v for k, v in config.items() if not is_feature_key(k)}
        schema_string = schema_from_arrow(schema)
        if "columnMapping" in (protocol.reader_features or ()):
            schema_string, max_id = assign_physical(schema_string)
            config[MAX_COLUMN_ID] = str(max_id)
        metadata = Metadata(
            str(uuid.uuid4()), schema_string, tuple(partition_by), config, now, name
        )
        info = CommitInfo(
            {
                "timestamp": now,
                "operation": "CREATE TABLE",
                "operationParameters": {"partitionBy": str(list(partition_by))},
                "engineInfo": "stream-sink",
                "txnId": str(uuid.uuid4()),
            }
        )
        if not log.write_commit(0, [info, protocol, metadata]):
            if exist_ok:
                return cls.load(location, io=log.io)
            raise TableAlreadyExistsError(
                f"a Delta table was created at {log.location} concurrently"
            )
        return cls.load(location, io=log.io)

    # --- state -----------------------------------------------------------------------------

    @property
    def location(self) -> str:
        return self.log.location

    @property
    def io(self) -> FileIO:
        return self.log.io

    @property
    def snapshot(self) -> DeltaSnapshot:
        return self._snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def schema(self) -> pa.Schema:
        return self._snapshot.arrow_schema

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self._snapshot.partition_columns

    def refresh(self) -> DeltaTable:
        self._snapshot, _ = update_snapshot(self.log, self._snapshot)
        return self

    def record_commit(self, snapshot: DeltaSnapshot) -> None:
        """Called by a transaction with the snapshot of the version it wrote."""
        if snapshot.version > self._snapshot.version:
            self._snapshot = snapshot

    def snapshot_at(self, version: int) -> DeltaSnapshot:
        return load_snapshot(self.log, version)

    # --- reading and writing ---------------------------------------------------------------

    def to_arrow(self, version: int | None = None) -> pa.Table:
        snapshot = self._snapshot if version is None else self.snapshot_at(version)
        return read_snapshot(snapshot, self.io)

    def new_transaction(self, isolation: IsolationLevel = "WriteSerializable") -> DeltaTransaction:
        return DeltaTransaction(self, isolation)

    def append(self, data: pa.Table) -> int:
        """Append ``data`` as one version (a blind append); returns the version."""
        adds = write_data_files(
            self.location,
            data,
            self.schema,
            self.partition_columns,
            io=self.io,
            mapping=self._snapshot.column_mapping,
        )
        txn = self.new_transaction().add_all(adds)
        return txn.commit("WRITE", {"mode": "Append"})
