"""Which Delta protocols this package reads and writes; refusing the others by name.

Reader: version 1; version 2 (column mapping); or 3 with reader features within
:data:`READER_FEATURES`. Writer: versions 1-2 (appendOnly, invariants), or 7 with writer
features within :data:`WRITER_FEATURES`. Legacy writer versions 3-6 imply features this
package does not write (check constraints, change data feed, generated columns,
identity columns) and are refused.

What each supported feature means here:
- ``deletionVectors``: rows a file's deletion vector names are never read; a MERGE keeps
  them deleted and may itself write deletion vectors (when ``delta.enableDeletionVectors``).
- ``columnMapping`` (``name`` and ``id``): files are read and written by physical names
  and Parquet field ids (:mod:`.column_mapping`).
- ``v2Checkpoint``: UUID-named and classic V2 checkpoints with sidecars are read; this
  package writes classic V1 checkpoints, which the protocol allows on such tables.
- ``typeWidening`` (and its preview name): files written before a widening read as the
  wider type; every recorded type change is checked to be one the protocol allows.
- ``domainMetadata`` (writer only): ``domainMetadata`` actions are read from commits and
  checkpoints, replay keeps the newest per domain (``removed`` drops it), and the
  checkpoints this package writes carry the live ones, so a domain outlives the log
  cleanup of the commit that wrote it. This package writes user-controlled domains only
  (:mod:`.domains`; a sink's source position, ``stream-sink.source-position.<sink>``),
  and only on a table whose protocol lists the feature; a concurrent commit writing the
  same domain is a conflict. A new table gets it only when asked
  (``delta.feature.domainMetadata=supported`` in its configuration): delta-rs 1.x
  reads such tables but refuses to write to them.
- ``vacuumProtocolCheck``: no effect on reads or commits; this package deletes no data
  files of a table except files it wrote and never committed, so it runs no VACUUM, and
  its log cleanup runs only after a commit, which checked the writer protocol.
- ``variantType`` / ``variantShredding`` are not supported: a table with a ``variant``
  column is refused by name. Listed but not active (no ``variant`` column in the
  schema, as on every table delta-rs 1.x creates with table features) they change
  nothing any reader or writer does, and are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping

from stream_sink.exceptions import UnsupportedError, ValidationError

from .actions import Protocol

READER_FEATURES = frozenset(
    {
        "timestampNtz",
        "deletionVectors",
        "columnMapping",
        "v2Checkpoint",
        "typeWidening",
        "typeWidening-preview",
        "vacuumProtocolCheck",
    }
)
DOMAIN_METADATA = "domainMetadata"
WRITER_ONLY_FEATURES = frozenset({"appendOnly", "invariants", DOMAIN_METADATA})
WRITER_FEATURES = READER_FEATURES | WRITER_ONLY_FEATURES
FEATURE_PREFIX = "delta.feature."
"""``delta.feature.<name>=supported`` in a new table's configuration adds the feature to
its protocol (as Delta Lake's table property does); the key is not stored."""
_LEGACY_WRITER = {
    3: "checkConstraints",
    4: "changeDataFeed, generatedColumns",
    5: "checkConstraints, changeDataFeed, generatedColumns",
    6: "identityColumns",
}
APPEND_ONLY = "delta.appendOnly"
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"


def protocol_for(
    uses_timestamp_ntz: bool, configuration: Mapping[str, str] | None = None
) -> Protocol:
    """The lowest protocol a new table needs: ``timestampNtz`` for a timestamp without a
    zone, ``deletionVectors`` when ``delta.enableDeletionVectors`` is true,
    ``columnMapping`` when ``delta.columnMapping.mode`` is name or id, and every feature a
    ``delta.feature.<name>=supported`` key names (:func:`requested_features`). Writer
    version 7 without reader features keeps the two features writer version 2 implies."""
    config = configuration or {}
    features = []
    if uses_timestamp_ntz:
        features.append("timestampNtz")
    if config.get(ENABLE_DELETION_VECTORS, "false").lower() == "true":
        features.append("deletionVectors")
    if config.get(COLUMN_MAPPING_MODE, "none").lower() in ("name", "id"):
        features.append("columnMapping")
    requested = requested_features(config)
    features += [f for f in requested if f in READER_FEATURES and f not in features]
    writer_only = [f for f in requested if f in WRITER_ONLY_FEATURES]
    if features:
        return Protocol(3, 7, tuple(features), tuple(features + writer_only))
    if writer_only:
        implied = [f for f in ("appendOnly", "invariants") if f not in writer_only]
        return Protocol(1, 7, None, tuple(implied + writer_only))
    return Protocol(1, 2)


def is_feature_key(key: str) -> bool:
    """Whether ``key`` is a ``delta.feature.<name>`` key (any case, as Delta matches it)."""
    return key.lower().startswith(FEATURE_PREFIX.lower())


_BY_LOWER_NAME = {f.lower(): f for f in WRITER_FEATURES}


def requested_features(configuration: Mapping[str, str]) -> list[str]:
    """The features ``delta.feature.<name>=supported`` keys name (case aside, as Delta
    Lake and Spark's lower-cased options spell them), in order; refuses
    (ValidationError) another value and (UnsupportedError) a feature this package does
    not write."""
    out = []
    for key, value in configuration.items():
        if not is_feature_key(key):
            continue
        name = _BY_LOWER_NAME.get(key[len(FEATURE_PREFIX) :].lower())
        if value.strip().lower() != "supported":
            raise ValidationError(f"{key}={value!r}: the only value is 'supported'")
        if name is None:
            raise UnsupportedError(
                f"{key}: stream_sink does not write tables with that feature "
                f"(supported: {sorted(WRITER_FEATURES)})"
            )
        if name not in out:
            out.append(name)
    return out


def reader_features(protocol: Protocol) -> frozenset[str]:
    """The reader features in effect (reader version 2 implies ``columnMapping``)."""
    if protocol.min_reader_version == 2:
        return frozenset({"columnMapping"})
    if protocol.min_reader_version >= 3:
        return frozenset(protocol.reader_features or ())
    return frozenset()


def writer_features(protocol: Protocol) -> frozenset[str]:
    """The writer features in effect (legacy versions as the features they imply)."""
    v = protocol.min_writer_version
    if v >= 7:
        return frozenset(protocol.writer_features or ())
    implied = {2: {"appendOnly", "invariants"}, 5: {"columnMapping"}}
    out: set[str] = set()
    for level in range(2, min(v, 6) + 1):
        out |= implied.get(level, set())
    return frozenset(out)


def supports_deletion_vectors(protocol: Protocol, configuration: Mapping[str, str]) -> bool:
    """True when a writer may write new deletion vectors on this table."""
    return (
        "deletionVectors" in writer_features(protocol)
        and configuration.get(ENABLE_DELETION_VECTORS, "false").lower() == "true"
    )


_VARIANT = frozenset({"variantType", "variantShredding", "variantType-preview"})


def _unsupported(features: tuple[str, ...] | None, known: frozenset[str], schema: str) -> list[str]:
    missing = set(features or ()) - known
    if '"variant"' not in schema:  # supported but not active: no variant column
        missing -= _VARIANT
    return sorted(missing)


def check_readable(protocol: Protocol, where: str, schema_string: str = '"variant"') -> None:
    """Raise UnsupportedError naming what this reader lacks (``schema_string``: the
    table's schema, to tell whether a listed variant feature is in use)."""
    v = protocol.min_reader_version
    if v in (1, 2):
        return
    if v == 3:
        missing = _unsupported(protocol.reader_features, READER_FEATURES, schema_string)
        if missing:
            raise UnsupportedError(
                f"{where}: the table needs reader features {missing} that stream_sink does "
                f"not support (supported: {sorted(READER_FEATURES)})"
            )
        return
    raise UnsupportedError(f"{where}: reader version {v} is newer than stream_sink supports (3)")


def check_writable(protocol: Protocol, where: str, schema_string: str = '"variant"') -> None:
    """Raise UnsupportedError naming the writer features this writer lacks."""
    check_readable(protocol, where, schema_string)
    v = protocol.min_writer_version
    if v <= 2:
        return
    if v in _LEGACY_WRITER:
        raise UnsupportedError(
            f"{where}: writer version {v} needs {_LEGACY_WRITER[v]}, which stream_sink does "
            "not write; use a table with writer version 2 or 7 without those features"
        )
    if v == 7:
        missing = _unsupported(protocol.writer_features, WRITER_FEATURES, schema_string)
        if missing:
            raise UnsupportedError(
                f"{where}: the table needs writer features {missing} that stream_sink does "
                f"not support (supported: {sorted(WRITER_FEATURES)})"
            )
        return
    raise UnsupportedError(f"{where}: writer version {v} is newer than stream_sink supports (7)")


def check_mode_allowed(configuration: Mapping[str, str], mode: str, where: str) -> None:
    """Refuse, before anything is written, a sink mode that removes or rewrites rows
    (``overwrite``, ``upsert``, ``changelog``) on a table with ``delta.appendOnly=true``,
    as Delta Lake refuses DELETE, UPDATE, MERGE and overwrite on such a table."""
    if mode != "append" and _append_only(configuration):
        raise ValidationError(
            f"{where}: the table has {APPEND_ONLY}=true, which allows only appends, so "
            f"mode {mode!r} (it replaces or deletes rows) cannot write to it; use mode "
            f"'append', or unset {APPEND_ONLY} (ALTER TABLE ... UNSET TBLPROPERTIES "
            f"('{APPEND_ONLY}') in Spark) if the table may change"
        )


def _append_only(configuration: Mapping[str, str]) -> bool:
    return configuration.get(APPEND_ONLY, "false").strip().lower() == "true"


def check_removes_allowed(configuration: Mapping[str, str], where: str) -> None:
    if _append_only(configuration):
        raise ValidationError(
            f"{where}: {APPEND_ONLY}=true forbids removing files; use append mode or unset it"
        )
