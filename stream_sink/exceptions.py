"""The one exception hierarchy of stream_sink.

Every error the package raises on purpose derives from :class:`StreamSinkError`.
Messages say *what* is wrong and *where* (table, file, column, row position,
batch id), so a user can act on them without a debugger. Raising any of these
never loses data that was already committed.
"""

from __future__ import annotations

import struct


class StreamSinkError(Exception):
    """Base of every error stream_sink raises on purpose."""


# --- bad input ---------------------------------------------------------------


class ValidationError(StreamSinkError, ValueError):
    """Input the caller gave is invalid (schema, options, rows)."""


class SchemaMismatchError(ValidationError):
    """Data does not match the table schema (names, types or nullability)."""


class IncompatibleSchemaChangeError(SchemaMismatchError):
    """A schema change Iceberg does not allow (narrowing, string to int, a new
    required column), or one the caller's options do not allow."""


class NullKeyError(ValidationError):
    """A null in an equality (key) field."""


class UnknownRowKindError(ValidationError):
    """A row kind other than +I, -U, +U, -D (or an unknown Debezium op)."""


class TransactionMetadataError(ValidationError):
    """A Debezium transaction block or BEGIN/END event lacks what holding transactions
    needs (an id, END's counts), or its counts disagree with the events seen."""


class MissingColumnError(ValidationError):
    """A column the operation requires (row kind, order, key) is absent."""


class InvalidTransformError(ValidationError):
    """An unknown partition transform, or a transform applied to a type it does not support."""


class InvalidStringError(ValidationError):
    """A string value is not valid UTF-8 (the message names the column and row)."""


class InvalidOptionError(ValidationError):
    """An option or table property has a value that cannot be used."""


# --- catalog objects ---------------------------------------------------------


class NotFoundError(StreamSinkError, LookupError):
    """Something that was asked for does not exist."""


class NoSuchNamespaceError(NotFoundError):
    pass


class NoSuchTableError(NotFoundError):
    pass


class NoSuchSnapshotError(NotFoundError):
    pass


class NoSuchRefError(NotFoundError):
    pass


class MissingFileError(NotFoundError):
    """A data, delete, manifest or metadata file referenced by the table is missing."""


class AlreadyExistsError(StreamSinkError):
    pass


class NamespaceAlreadyExistsError(AlreadyExistsError):
    pass


class TableAlreadyExistsError(AlreadyExistsError):
    pass


class NamespaceNotEmptyError(StreamSinkError):
    pass


# --- corruption --------------------------------------------------------------


class CorruptionError(StreamSinkError):
    """Stored bytes cannot be decoded: metadata JSON, Avro manifest, state, checkpoint."""


class CorruptMetadataError(CorruptionError):
    pass


class CorruptStateError(CorruptionError):
    pass


class CorruptDeleteFileError(CorruptionError):
    """A delete file cannot be decoded or disagrees with the manifest entry naming it
    (a Puffin file's magic or footer, a deletion vector's length, checksum or
    cardinality); the message names the file. Nothing is applied from it."""


class UnreadableFileError(CorruptionError):
    """A data or delete file whose bytes the reader cannot decode: damaged, or written in a
    shape of its format that pyarrow (Parquet, ORC) or fastavro (Avro) does not read. The
    message names the file, its table and what to do; nothing is read from the table."""


DECODE_ERRORS: tuple[type[Exception], ...] = (
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    AttributeError,
    ArithmeticError,
    RecursionError,
    struct.error,
)
"""What Python raises by itself on a damaged or crafted file: a missing key, a field of
the wrong type (a list for an object, a string for a number), a number too large
(``1e400`` as an int), nesting deeper than the interpreter's recursion limit, bytes that
are not UTF-8 or not JSON. Every parser of stored files (table metadata, manifests,
Puffin footers, checkpoints, the Delta log) catches these and raises its
:class:`CorruptionError` naming the file instead. (Not ``LookupError``: that would take
:class:`NotFoundError`, a missing file, for damage.)"""


# --- commits -----------------------------------------------------------------


class CommitError(StreamSinkError):
    """Base of commit failures."""


class CommitFailedError(CommitError):
    """The commit lost a race (the table changed underneath); safe to retry after a refresh."""


class CommitStateUnknownError(CommitError):
    """The outcome of a commit is unknown; it must not be retried blindly."""


class CommitValidationError(CommitError):
    """A validation hook refused the commit (e.g. the watermark moved past it)."""


class PartialCommitError(CommitError):
    """A commit of several tables that had to be atomic shows on some of them and not on
    the others. Never retried or cleaned up: what each table holds must be looked at."""


class CommitConflictError(CommitValidationError):
    """A concurrent commit that won conflicts with this one (Delta's
    ConcurrentModificationException); the table is unchanged, re-plan and retry."""


class ConcurrentAppendError(CommitConflictError):
    """A winning commit added files to data this commit read (e.g. a replaced partition)."""


class ConcurrentDeleteReadError(CommitConflictError):
    """A winning commit removed a file this commit read or rewrites."""


class ConcurrentDeleteDeleteError(CommitConflictError):
    """A winning commit removed a file this commit removes too."""


class ConcurrentDeletionVectorError(CommitConflictError):
    """A winning commit added a deletion vector for a data file this commit also adds
    one for (v3 allows one per data file): re-read the winner's, merge, retry."""


class StalePositionsError(CommitConflictError):
    """A commit landed between resolving a batch's deletes to positions and committing
    them (``deletes="positions"``): the positions may point at removed or re-deleted
    rows; resolve the keys again and retry."""


class MetadataChangedError(CommitConflictError):
    """A winning commit changed the table's metadata (schema, partitioning, properties)."""


class ProtocolChangedError(CommitConflictError):
    """A winning commit changed the table's protocol versions or features."""


class ConcurrentTransactionError(CommitConflictError):
    """A winning commit advanced a transaction id (``txn`` appId) this commit read."""


class ConcurrentDomainMetadataError(CommitConflictError):
    """A winning commit wrote (or removed) a Delta ``domainMetadata`` domain this commit
    writes too."""


# --- catalog servers -----------------------------------------------------------


class CatalogError(StreamSinkError):
    """A catalog server answered a request with an error (the message quotes it)."""


class CatalogAuthError(CatalogError, PermissionError):
    """The catalog refused our credentials (401/403): the message names the catalog and
    the properties that carry them, never their values."""


class CatalogRequestError(CatalogError):
    """The catalog refused a request (4xx/5xx); ``status`` and the server's error type and
    message are kept for callers that act on them."""

    def __init__(
        self, message: str, *, status: int, error_type: str = "", server_message: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.server_message = server_message


class CatalogUnavailableError(CatalogError):
    """The catalog server could not be reached (connection refused, dropped, timed out)
    after bounded retries."""


# --- storage -----------------------------------------------------------------


class SinkIOError(StreamSinkError):
    """Reading or writing storage failed (disk full, read-only, permissions, network).
    The message names the path (and, from the sink, the table and batch, and whether
    anything is lost); the original error is chained as ``__cause__``."""


class RemoteStorageError(SinkIOError, OSError):
    """An object store (S3) could not be reached or refused a request. The message names
    the location, the endpoint and the bucket, and what to check. Also an ``OSError``, so
    code that tolerates a failed clean-up of a file (and logs it) still does."""


# --- unsupported -------------------------------------------------------------


class TruncateInBatchError(StreamSinkError):
    """A micro-batch holds a TRUNCATE of its source table (row kind ``-T``). Raised inside
    Spark as the batch is first read, before any file is written; the foreachBatch sinks
    catch it and write the batch again from after the truncate
    (``stream_sink.spark.cdc.truncation``), so users see it only from code that reads a
    changelog with truncates some other way."""


class UnsupportedError(StreamSinkError, NotImplementedError):
    """A feature the table or option asks for is not supported here."""


class UnsupportedTypeError(UnsupportedError):
    """A column of a type stream_sink does not read or write (Iceberg's ``variant``,
    ``geometry``, ``geography``; Delta's ``void``, ``variant``): the message names the
    column (its path, outermost first), the type and the format."""

    def __init__(self, type_name: str, fmt: str, path: tuple[str, ...] = ()) -> None:
        self.type_name, self.fmt, self.path = type_name, fmt, path
        what = f"type {type_name} ({fmt})"
        if path:
            what = f"column {'.'.join(path)!r} has {what}"
        super().__init__(
            f"{what}, which stream_sink does not support: a table with such a column "
            "cannot be read or written here"
        )

    def within(self, name: str) -> UnsupportedTypeError:
        """The same error for the column ``name`` holding this one."""
        return UnsupportedTypeError(self.type_name, self.fmt, (name, *self.path))


class AtomicCommitUnsupportedError(UnsupportedError):
    """The catalog cannot commit several tables in one transaction (Hadoop, a REST
    server without ``transactions/commit``): the caller commits them one by one."""


class ReadOnlyTableError(UnsupportedError):
    """A write to a table opened from its metadata file (``load_static_table``): such a
    table has no catalog to commit through. The message names the file and says how to
    open the table for writing."""


class UnsupportedSchemeError(InvalidOptionError, UnsupportedError):
    """A location's scheme (``gs://``, ``abfs://``) has no FileIO here; the message names
    it and says what would serve it."""


# --- streaming protocol ------------------------------------------------------


class CheckpointError(StreamSinkError):
    """A checkpoint cannot be written, read or restored."""


class TableMismatchError(CheckpointError):
    """A sink's checkpoint location or operator state belongs to another table."""


class BatchInterruptedError(StreamSinkError):
    """Spark interrupted a micro-batch (its query is stopping): nothing of the batch is
    committed, and the query's next run writes it again."""


class DataLossError(StreamSinkError):
    """Starting would silently lose batches that upstream already acknowledged."""


class SkippedBatchError(DataLossError):
    """Upstream ran a batch that never reached the sink (a ``foreachBatch`` function
    returned without calling it): the batch's changes are not in the table."""


class SourcePositionError(StreamSinkError):
    """A query cannot continue from the source position a table records for its sink
    (``resume_from_table``): the position named is not the one recorded, or the query
    does not start at the recorded end offsets."""


class StateLockedError(StreamSinkError):
    """An operator state directory is already open (by this or another process)."""


# Java Iceberg spelling, for readers who know that code base.
CommitFailedException = CommitFailedError
CommitStateUnknownException = CommitStateUnknownError


class ExecutorEnvironmentError(StreamSinkError):
    """Spark's executors cannot run stream_sink (the package is missing there)."""
