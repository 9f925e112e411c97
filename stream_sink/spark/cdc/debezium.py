"""Debezium change events to a changelog DataFrame (row kind + source order).

Mapping (Flink's RowKind names):

=====  ==========================================
``op``  rows
=====  ==========================================
c, r   ``+I`` after
u      ``-U`` before (when present), ``+U`` after
d      ``-D`` before
t      ``-T`` (TRUNCATE), its columns null
=====  ==========================================

Invariants:
- Every output row carries ``_row_kind`` and ``_cdc_order``: a struct of the
  ``order_by`` values followed by the change's position inside its event (``-U`` 0,
  ``+U`` 1), so sorting by it replays one key's changes in source order.
- Bad events stop the query instead of being skipped: an unknown ``op`` raises
  UnknownRowKindError, unparsable JSON, a missing ``op`` or a row image that the op
  needs (``after`` for c/r/u, ``before`` for d) raise ValidationError. The errors are
  raised inside Spark (``raise_error``) and turned back into these classes by the
  sink, with the offending value in the message, preceded by the event's Kafka topic,
  partition and offset when ``df`` has those columns (as Spark's Kafka source gives).
- A TRUNCATE (``op`` t) is one ``-T`` row at the truncate's position, its columns null
  (also with ``table_column``: it names its table); the sinks empty the table there
  (:mod:`.truncation`). Debezium sends it without a Kafka key, which is not the keyless
  event refused below.
- Refused, since applying them would make the table differ from the source: a
  string column holding Debezium's TOAST
  placeholder ``__debezium_unavailable_value`` (an unchanged large value PostgreSQL did
  not send: ValidationError naming the column and ``REPLICA IDENTITY FULL``), and, when
  the Kafka ``key`` column is present, an event without a key (a source table without a
  primary key: ValidationError).
- Kafka tombstones (a null value; Debezium writes one after each delete so that log
  compaction can drop the key) mean "this key is deleted": with the Kafka ``key``
  column present they become ``-D`` of the key parsed from it (the other columns null).
  The key's delete event usually came just before, and deleting a deleted key changes
  nothing; but on a compacted topic the tombstone may be all that is left of it. Its
  position is the start of its micro-batch for envelope paths (a tombstone has no
  ``source``): every change of its key in the batch that came before it is the delete it
  follows (compaction keeps nothing older beside a tombstone), so applying it first is
  exact, and a key deleted and created again in one batch (a primary-key update there
  and back) keeps its new row. Without a ``key`` column,
  or with ``table_column`` (a tombstone names no table), tombstones are dropped.
- Updates without a before image (PostgreSQL's default replica identity) give ``-U``
  with the after image: an update never changes the key (Debezium turns a key change
  into a delete and a create), and ``-U`` deletes by the equality key, so mode
  ``changelog`` retracts the old row as it must; mode ``upsert`` ignores ``-U``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stream_sink.exceptions import MissingColumnError, SchemaMismatchError
from stream_sink.spark.cdc import wire_types
from stream_sink.spark.cdc.control_columns import (
    DATA_COLLECTION_COLUMN,
    KEY_FIELDS_COLUMN,
    ORDER_COLUMN,
    ROW_KIND_COLUMN,
    TRANSACTION_ID_COLUMN,
    TRANSACTION_KEY_COLUMN,
    TRANSACTION_MARKER_COLUMN,
    marked,
)
from stream_sink.spark.cdc.truncation import TRUNCATE
from stream_sink.spark.errors import spark_error_message
from stream_sink.table.schema import Schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructField, StructType

CHANGE_POSITION_FIELD = "_change"
DEFAULT_ORDER_BY: tuple[str, ...] = ("source.lsn",)
SOURCE_DB, SOURCE_SCHEMA, SOURCE_TABLE = "source.db", "source.schema", "source.table"
ENVELOPE_FIELDS = ("op", "before", "after", "source", "ts_ms", "transaction")
KAFKA_KEY_COLUMN = "key"
"""Kafka's message key column: a tombstone's key is read from it."""
TOMBSTONE_POSITION = -(2**63)
"""Envelope positions of a tombstone (it has no ``source``): before every other change."""
TOAST_PLACEHOLDER = "__debezium_unavailable_value"
"""Debezium's value for an unchanged TOASTed column PostgreSQL did not send (its default
``unavailable.value.placeholder``)."""
KAFKA_LOCATION = ("topic", "partition", "offset")
"""Columns of Spark's Kafka source that locate an event; named in error messages."""
_MAX_SHOWN = 200


def from_debezium(
    df: DataFrame,
    *,
    row_schema: StructType | Schema | str | Mapping[str, StructType | Schema | str],
    order_by: str | Sequence[str] = DEFAULT_ORDER_BY,
    value_column: str = "value",
    row_kind_column: str = ROW_KIND_COLUMN,
    order_column: str = ORDER_COLUMN,
    table_column: str | None = None,
    key_column: str | None = None,
    transactions: bool = False,
) -> DataFrame:
    """The changes of Debezium events in ``df`` as rows of ``row_schema``.

    ``df`` holds either JSON envelopes (a string or binary ``value_column``, as read from
    Kafka or with ``spark.readStream.text``; with or without the ``schema``/``payload``
    wrapper), or already parsed envelope columns (``op``, ``before``, ``after``,
    ``source``). ``order_by`` names the source position: envelope paths such as
    ``source.lsn``, ``source.ts_ms`` or ``ts_ms`` (read as long), or columns of ``df``
    such as a Kafka ``offset``. Pass ``row_kind_column`` and ``order_column`` on to
    ``IcebergSink(row_kind_column=..., order_by=...)``.

    Values are converted exactly from Debezium's JSON encodings to ``row_schema``'s types
    (:mod:`.wire_types`): with the row schema :func:`debezium_row_schema` reads from the
    events, a ``numeric(20,4)`` becomes ``decimal(20,4)``, a ``date`` a date, a
    ``timestamptz`` a timestamp; a value that does not convert without loss stops the
    query naming the column and the event.

    One stream of many tables: ``table_column`` adds a column holding the event's source
    table as ``<source.schema>.<source.table>`` (``<source.db>.<source.table>`` for
    sources without schemas, such as MySQL; pass it to ``IcebergSink(table_column=...)``);
    ``row_schema`` may then map each table name to its row schema (rows are parsed with
    their union; columns of other tables stay null). ``key_column`` names the column of
    the Debezium key (Kafka's ``key``, JSON): its field names become column
    ``_cdc_key_fields``, the identifier fields of tables the sink creates.

    ``transactions=True`` (JSON envelopes, connector with
    ``provide.transaction.metadata=true``; subscribe the ``<topic.prefix>.transaction``
    topic in the same query): each change row gets its transaction id
    (``_transaction_id``, null for snapshot reads), its data collection as END events
    name it (``_data_collection``: ``<schema>.<table>``, or ``<db>.<table>``) and its
    Kafka key (``_transaction_key``, the ``key_column``); each BEGIN/END event of the
    transaction topic becomes one row with the event in ``_transaction_marker`` and every
    other column null. Pass the result to a sink with ``transactions="debezium"``,
    which commits only whole source transactions (:mod:`stream_sink.commit.transactions`).
    """
    args = dict(
        row_schema=row_schema,
        order_by=order_by,
        value_column=value_column,
        row_kind_column=row_kind_column,
        order_column=order_column,
        table_column=table_column,
        key_column=key_column,
    )
    if transactions:
        return _with_transactions(df, **args)  # type: ignore[arg-type]
    return _parse_changes(df, transactions=False, **args)  # type: ignore[arg-type]


def _parse_changes(
    df: DataFrame,
    *,
    row_schema: StructType | Schema | str | Mapping[str, StructType | Schema | str],
    order_by: str | Sequence[str],
    value_column: str,
    row_kind_column: str,
    order_column: str,
    table_column: str | None,
    key_column: str | None,
    transactions: bool,
) -> DataFrame:
    """:func:`from_debezium`'s change rows (with the transaction columns when asked)."""
    from pyspark.sql import functions as F

    typed = (
        union_schema(row_schema) if isinstance(row_schema, Mapping) else to_spark_schema(row_schema)
    )
    parsing = "op" not in df.columns
    rows = wire_types.parse_schema(typed) if parsing else typed
    orders = (order_by,) if isinstance(order_by, str) else tuple(order_by)
    if not orders:
        raise MissingColumnError("from_debezium: order_by must name at least one position field")
    taken = [c for c in orders if c in df.columns]
    envelope_paths = [c for c in orders if c not in df.columns]
    source_fields: Sequence[str] = ("db", "schema", "table")
    if "op" in df.columns:
        env = F.struct(*(F.col(c) for c in ENVELOPE_FIELDS if c in df.columns))
        source_fields = _struct_fields(df, "source")
        raw: Column = F.to_json(env)
        _check_paths(df, envelope_paths)
    else:
        if value_column not in df.columns:
            raise MissingColumnError(
                f"from_debezium: column {value_column!r} is missing (columns: {df.columns}); "
                "pass value_column= or a DataFrame with an 'op' column"
            )
        if KAFKA_KEY_COLUMN not in df.columns or table_column:
            df = df.where(F.col(value_column).isNotNull())
        raw = F.col(value_column).cast("string")
        names = [SOURCE_DB, SOURCE_SCHEMA, SOURCE_TABLE] if table_column or transactions else []
        env = _parse(raw, rows, envelope_paths, names)
    keyed = "op" not in df.columns and KAFKA_KEY_COLUMN in df.columns and not table_column
    tombstone = F.col(value_column).isNull() if keyed else F.lit(False)
    keyless = F.col(KAFKA_KEY_COLUMN).isNull() if keyed else F.lit(False)
    detail = _detail(df, raw)
    # a typed null without a key column: pyspark 3.5 cannot extract fields from NULL
    key_image = _parse_key(F.col(KAFKA_KEY_COLUMN), rows) if keyed else F.lit(None).cast(rows)
    # Parsed once, in a projection of their own: built into the expressions below, each
    # use (every field, every CASE branch) would parse the event again (90 parses per
    # event in the optimized plan), which made the parse 15x slower than one from_json.
    df = df.select("*", env.alias(_ENVELOPE), key_image.alias(_KEY_IMAGE))
    env, key_image = F.col(_ENVELOPE), F.col(_KEY_IMAGE)
    position = [F.col(c) for c in taken] + [
        F.when(tombstone, F.lit(TOMBSTONE_POSITION)).otherwise(_path(env, p).cast("long"))
        for p in envelope_paths
    ]
    extra = _source_columns(env, table_column, key_column, source_fields)
    if transactions:
        extra += _transaction_columns(raw, env, key_column, source_fields)
    changes = F.when(
        tombstone, F.array(_change("-D", _key_row(key_image, rows), 2, detail))
    ).otherwise(_changes(env, detail, rows, keyless))
    exploded = df.select(
        F.explode(changes).alias("c"),
        *(p.alias(f"_pos{i}") for i, p in enumerate(position)),
        *(c.alias(name) for name, c in extra),
    )
    row = F.when(
        F.col("c.row").isNull() & (F.col("c.k") != F.lit(TRUNCATE)),
        _fail("ValidationError", "Debezium event has no row image for its op: ", F.col("c.raw")),
    ).otherwise(F.col("c.row"))
    order_fields = [F.col(f"_pos{i}").alias(_order_name(o)) for i, o in enumerate(orders)]
    order_fields.append(F.col("c.seq").alias(CHANGE_POSITION_FIELD))
    control = [
        marked(F.col("c.k"), row_kind_column),
        marked(F.struct(*order_fields), order_column),
        *(F.col(name) for name, _ in extra),
    ]
    if not (parsing and wire_types.needs_conversion(typed)):
        return exploded.select(*(row.getField(f.name).alias(f.name) for f in rows.fields), *control)
    return _converted(exploded, row, typed, control)


def _with_transactions(df: DataFrame, *, value_column: str, **kwargs: Any) -> DataFrame:
    """``from_debezium(..., transactions=True)``: the transaction topic's BEGIN/END events
    split off as marker rows (recognised by their fields: a ``status`` of BEGIN or END and
    no ``op``), the change events parsed with their transaction columns, then both in one
    DataFrame (change rows first)."""
    from pyspark.sql import functions as F

    if "op" in df.columns or value_column not in df.columns:
        raise MissingColumnError(
            f"from_debezium(transactions=True): column {value_column!r} of JSON events is "
            f"needed (columns: {df.columns}); transaction metadata is read from the events "
            "as Kafka delivers them"
        )
    raw = F.col(value_column).cast("string")
    is_marker = F.coalesce(
        _json_field(raw, "status").isin("BEGIN", "END") & _json_field(raw, "op").isNull(),
        F.lit(False),
    )
    parsed = _parse_changes(
        df.where(~is_marker), value_column=value_column, transactions=True, **kwargs
    )
    text = F.coalesce(F.get_json_object(raw, "$.payload"), raw)
    markers = df.where(is_marker).select(marked(text, TRANSACTION_MARKER_COLUMN))
    null_marker = marked(F.lit(None).cast("string"), TRANSACTION_MARKER_COLUMN)
    return parsed.select("*", null_marker).unionByName(markers, allowMissingColumns=True)


def _json_field(raw: Column, path: str) -> Column:
    """A field of a JSON event, under its Kafka Connect ``payload`` or at its top."""
    from pyspark.sql import functions as F

    return F.coalesce(
        F.get_json_object(raw, f"$.payload.{path}"), F.get_json_object(raw, f"$.{path}")
    )


def _transaction_columns(
    raw: Column, env: Column, key_column: str | None, source_fields: Sequence[str]
) -> list[tuple[str, Column]]:
    """The transaction id, data collection and Kafka key of each change event."""
    from pyspark.sql import functions as F

    key = F.col(key_column).cast("string") if key_column else F.lit(None).cast("string")
    return [
        (TRANSACTION_ID_COLUMN, marked(_json_field(raw, "transaction.id"), TRANSACTION_ID_COLUMN)),
        (
            DATA_COLLECTION_COLUMN,
            marked(_source_table(env.getField("source"), source_fields), DATA_COLLECTION_COLUMN),
        ),
        (TRANSACTION_KEY_COLUMN, marked(key, TRANSACTION_KEY_COLUMN)),
    ]


def _converted(
    exploded: DataFrame, row: Column, typed: StructType, control: list[Column]
) -> DataFrame:
    """The changes with each column converted from its JSON encoding to its row schema
    type (:mod:`.wire_types`): read into working columns first, so each conversion
    names the value it reads, beside the event it came from."""
    from pyspark.sql import functions as F

    work = {f.name: f"_cdc_wire{i}" for i, f in enumerate(typed.fields)}
    staged = exploded.select(
        *(row.getField(name).alias(w) for name, w in work.items()),
        F.col("c.raw").alias(_EVENT),
        *control,
    )

    def fail(message: str, value: Column) -> Column:
        text = F.concat(F.lit(message), value, F.lit(" does not convert exactly; event: "))
        return _fail("ValidationError", text, F.col(_EVENT))

    kept = [c for c in staged.columns if c not in work.values() and c != _EVENT]
    return staged.select(
        *(wire_types.converted(work[f.name], f, fail).alias(f.name) for f in typed.fields),
        *(F.col(f"`{c}`") for c in kept),
    )


_ENVELOPE = "_cdc_envelope"
_KEY_IMAGE = "_cdc_key_image"
_EVENT = "_cdc_event"
"""Working columns of :func:`from_debezium` (the parsed event and its Kafka key's row);
neither is in its result."""


def to_spark_schema(schema: StructType | Schema | pa.Schema | str) -> StructType:
    """A Spark StructType from a StructType, a DDL string, a pyarrow schema or a
    stream_sink Schema (naive timestamps as ``timestamp_ntz``)."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, Schema):
        from stream_sink.table.arrow import schema_to_arrow

        return wire_types.spark_schema(schema_to_arrow(schema))
    if isinstance(schema, pa.Schema):
        return wire_types.spark_schema(schema)
    parsed = _parse_datatype_string(schema)
    if not isinstance(parsed, StructType):
        raise MissingColumnError(f"from_debezium: row_schema {schema!r} is not a struct")
    return parsed


def _change(kind: str, image: Column, seq: int, detail: Column) -> Column:
    """One change: (row kind, row image, position in its event, the event as shown)."""
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(kind).alias("k"), image.alias("row"), F.lit(seq).alias("seq"), detail.alias("raw")
    )


def _detail(df: DataFrame, raw: Column) -> Column:
    """The event as error messages show it: its Kafka location when known, then its
    first characters, from its ``payload`` on when it has one (``<tombstone>`` for a null
    value)."""
    from pyspark.sql import functions as F

    # from its payload on when the event carries its Kafka Connect schema first
    start = F.greatest(F.instr(raw, '"payload"'), F.lit(1))
    shown = F.coalesce(raw.substr(start, F.lit(_MAX_SHOWN)), F.lit("<tombstone>"))
    if not set(KAFKA_LOCATION) <= set(df.columns):
        return shown
    topic, partition, offset = (F.col(c).cast("string") for c in KAFKA_LOCATION)
    return F.concat(
        F.lit("topic "), topic, F.lit(" partition "), partition, F.lit(" offset "), offset,
        F.lit(": "), shown,
    )  # fmt: skip


def _parse_key(key: Column, rows: StructType) -> Column:
    """Kafka's key JSON (``{"id": 1}``, or wrapped in schema/payload) as a row struct."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    wrapper = StructType([*rows.fields, StructField("payload", rows)])
    parsed = F.from_json(key.cast("string"), wrapper, {"mode": "PERMISSIVE"})
    payload = parsed.getField("payload")
    return F.when(payload.isNotNull(), payload).otherwise(
        F.struct(*(parsed.getField(f.name).alias(f.name) for f in rows.fields))
    )


def _key_row(key: Column, rows: StructType) -> Column:
    """A tombstone's row image: the key fields from Kafka's key, the rest null."""
    from pyspark.sql import functions as F

    return F.when(key.isNull(), F.lit(None)).otherwise(
        F.struct(*(key.getField(f.name).alias(f.name) for f in rows.fields))
    )


def _changes(env: Column, raw: Column, rows: StructType, keyless: Column) -> Column:
    """Per event, an array of (row kind, row image, position in event, event as shown);
    ``raw`` is the event as shown, ``keyless`` whether its Kafka key is missing."""
    from pyspark.sql import functions as F

    op = env.getField("op")
    before, after = env.getField("before"), env.getField("after")
    toasted = _toasted_columns(after, rows)

    def change(kind: str, image: Column, seq: int) -> Column:
        return _change(kind, image, seq, raw)

    return (
        F.when(
            env.isNull() | op.isNull(),
            _fail("ValidationError", "malformed Debezium event (not JSON, or no 'op'): ", raw),
        )
        .when(op == "t", F.array(change(TRUNCATE, F.lit(None).cast(rows), 0)))
        .when(
            keyless,
            _fail(
                "ValidationError",
                "Debezium event without a Kafka key: its source table has no primary key, "
                "so its rows cannot be told apart for updates and deletes; add a PRIMARY KEY "
                "to the source table (or name key columns with Debezium's "
                "message.key.columns): ",
                raw,
            ),
        )
        .when(
            toasted != "",
            _fail(
                "ValidationError",
                F.concat(
                    F.lit(
                        f"Debezium event has the placeholder {TOAST_PLACEHOLDER} (an unchanged "
                        "TOASTed value PostgreSQL did not send) in column(s) "
                    ),
                    toasted,
                    F.lit(
                        "; the sink does not guess the value: set ALTER TABLE ... REPLICA "
                        "IDENTITY FULL on the source table so that every change carries "
                        "every column: "
                    ),
                ),
                raw,
            ),
        )
        .when(op.isin("c", "r"), F.array(change("+I", after, 0)))
        .when(
            op == "u", F.array(change("-U", F.coalesce(before, after), 0), change("+U", after, 1))
        )
        .when(op == "d", F.array(change("-D", before, 0)))
        .otherwise(
            _fail(
                "UnknownRowKindError",
                "unknown Debezium op (expected c, r, u, d or t): ",
                F.concat(F.lit("op="), op, F.lit(" in "), raw),
            )
        )
    )


def _parse(
    raw: Column, rows: StructType, paths: Sequence[str], text_paths: Sequence[str]
) -> Column:
    """Parse JSON envelopes, with or without Kafka Connect's schema/payload wrapper."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    fields = [
        StructField("op", StringType()),
        StructField("before", rows),
        StructField("after", rows),
    ]
    typed: dict[str, DataType] = {p: LongType() for p in paths}
    typed.update({p: StringType() for p in text_paths})
    fields += _position_fields(typed)
    envelope = StructType(fields)
    wrapper = StructType([*envelope.fields, StructField("payload", envelope)])
    parsed = F.from_json(raw, wrapper, {"mode": "PERMISSIVE"})
    payload = parsed.getField("payload")
    return F.when(payload.isNotNull(), payload).otherwise(
        F.struct(*(parsed.getField(f.name).alias(f.name) for f in envelope.fields))
    )


def _position_fields(paths: Mapping[str, DataType]) -> list[StructField]:
    """Struct fields holding every dotted path (``source.lsn`` → source: struct<lsn>)."""
    from pyspark.sql.types import StructField, StructType

    tree: dict[str, dict[str, Any]] = {}
    leaves: dict[tuple[str, ...], DataType] = {}
    for p, leaf in paths.items():
        node = tree
        for part in p.split("."):
            node = node.setdefault(part, {})
        leaves[tuple(p.split("."))] = leaf

    def build(node: dict[str, Any], at: tuple[str, ...]) -> list[StructField]:
        out = []
        for name, child in node.items():
            here = (*at, name)
            out.append(StructField(name, StructType(build(child, here)) if child else leaves[here]))
        return out

    return [f for f in build(tree, ()) if f.name not in ("op", "before", "after")]


def union_schema(schemas: Mapping[str, StructType | Schema | str]) -> StructType:
    """The columns of every table's row schema, once each (first seen order); a column
    two tables give different types raises SchemaMismatchError naming both."""
    from pyspark.sql.types import StructType

    fields: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for table, raw in schemas.items():
        for f in to_spark_schema(raw).fields:
            seen = fields.get(f.name)
            if seen is not None and seen.dataType != f.dataType:
                raise SchemaMismatchError(
                    f"from_debezium: column {f.name!r} is {seen.dataType.simpleString()} in "
                    f"{owner[f.name]} but {f.dataType.simpleString()} in {table}; give one of "
                    "them another name"
                )
            fields.setdefault(f.name, f)
            owner.setdefault(f.name, table)
    return StructType(list(fields.values()))


def _source_columns(
    env: Column, table_column: str | None, key_column: str | None, source_fields: Sequence[str]
) -> list[tuple[str, Column]]:
    """The source table (:func:`_source_table`) and Debezium key field names, as asked;
    ``source_fields`` are the fields the events' ``source`` block can have."""
    from pyspark.sql import functions as F

    out: list[tuple[str, Column]] = []
    if table_column:
        out.append((table_column, _source_table(env.getField("source"), source_fields)))
    if key_column:
        key = F.col(key_column).cast("string")
        payload = F.get_json_object(key, "$.payload")
        text = F.when(payload.isNotNull(), payload).otherwise(key)
        parsed = F.from_json(text, "map<string,string>")
        out.append((KEY_FIELDS_COLUMN, marked(F.map_keys(parsed), KEY_FIELDS_COLUMN)))
    return out


def _struct_fields(df: DataFrame, column: str) -> tuple[str, ...]:
    from pyspark.sql.types import StructType

    if column not in df.columns:
        return ()
    kind = df.schema[column].dataType
    return tuple(kind.fieldNames()) if isinstance(kind, StructType) else ()


def _source_table(source: Column, fields: Sequence[str]) -> Column:
    """``<schema>.<table>`` where the source has schemas (PostgreSQL, SQL Server, Oracle:
    Debezium's topic names the same), else ``<db>.<table>`` (MySQL, whose databases are
    its schemas): tables of one name in two schemas stay two tables."""
    from pyspark.sql import functions as F

    table = source.getField("table")
    if "schema" not in fields:
        return F.concat_ws(".", source.getField("db"), table)
    schema = source.getField("schema")
    space = F.when(schema.isNull() | (schema == ""), source.getField("db")).otherwise(schema)
    return F.concat_ws(".", space, table)


def _check_paths(df: DataFrame, paths: Sequence[str]) -> None:
    from pyspark.errors import AnalysisException

    for p in paths:
        try:
            df.select(_path_col(p)).schema  # noqa: B018 (resolves the column or raises)
        except AnalysisException:
            raise MissingColumnError(
                f"from_debezium: order field {p!r} is neither a column nor an envelope path "
                f"(columns: {df.columns})"
            ) from None


def _path(env: Column, path: str) -> Column:
    col = env
    for part in path.split("."):
        col = col.getField(part)
    return col


def _path_col(path: str) -> Column:
    from pyspark.sql import functions as F

    first, *rest = path.split(".")
    col = F.col(f"`{first}`")
    for part in rest:
        col = col.getField(part)
    return col


def _order_name(path: str) -> str:
    return path.replace(".", "_")


def _toasted_columns(image: Column, rows: StructType) -> Column:
    """The string columns of ``image`` holding the TOAST placeholder, comma-separated
    (empty when none)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    names = [f.name for f in rows.fields if isinstance(f.dataType, StringType)]
    hits = [F.when(image.getField(n) == TOAST_PLACEHOLDER, F.lit(n)) for n in names]
    return F.concat_ws(", ", *hits) if hits else F.lit("")


def debezium_row_schema(
    df: DataFrame,
    value_column: str = "value",
    *,
    types: Any = None,
    key_column: str = KAFKA_KEY_COLUMN,
) -> StructType:
    """The row schema of the Debezium events in a (micro-batch) DataFrame, typed as the
    source table has them, for :func:`from_debezium`.

    Read from the events' Kafka Connect schemas (JsonConverter with
    ``schemas.enable=true``): the union of every distinct schema in the batch
    (:mod:`stream_sink.table.connect_schema`), so a column added to the source table
    mid-stream reaches the sink with the first batch holding it (the sink's
    ``schema_evolution`` adds it to the table). Connect's and Debezium's logical types
    give the source's types (decimal, date, timestamp, ...).

    ``types``: the target table's schema (a Table, Schema, pyarrow or Spark schema, DDL
    string). A column the events carry as a plain string or number (Debezium's
    ``decimal.handling.mode=string`` or ``double``) takes the table's type when the
    table has the column, converted exactly by :func:`from_debezium`.

    A batch of tombstones only (a compacted topic, a delete's tombstone alone in its
    batch) has no event schema: the row schema is then its Kafka keys' (their Connect
    schemas, ``key.converter.schemas.enable=true``), else ``types``; a batch holding no
    record at all gets ``types`` (or no columns). So every batch can be handed to the
    sink: a foreachBatch function never has a reason to skip one.

    ValidationError when events carry no schema, or when tombstones carry neither a
    key schema nor ``types`` to type their keys by.
    """
    from pyspark.sql import functions as F

    from stream_sink.exceptions import ValidationError
    from stream_sink.table.connect_schema import key_schema_of, merge_row_schemas, row_schema_of

    table_types = _types_of(types)
    found = _schemas(df, value_column)
    if found:
        merged = merge_row_schemas(row_schema_of(t) for t in found)
        return _with_types(wire_types.spark_schema(merged), table_types)
    if df.where(F.col(value_column).isNotNull()).limit(1).count() > 0:
        raise ValidationError(
            f"no Debezium event in column {value_column!r} of this batch has a Kafka Connect "
            "schema; use JsonConverter with schemas.enable=true, or pass row_schema= to "
            "from_debezium"
        )
    keys = _schemas(df, key_column) if key_column in df.columns else []
    if keys:
        merged = merge_row_schemas(key_schema_of(t) for t in keys)
        return _with_types(wire_types.spark_schema(merged), table_types)
    if table_types is not None:
        return table_types
    if df.limit(1).count() > 0:
        raise ValidationError(
            f"this batch holds only tombstones (null {value_column!r}) and their Kafka keys "
            "carry no Kafka Connect schema, so the key columns' types are unknown: set "
            "key.converter.schemas.enable=true in Kafka Connect, or pass "
            "types=<the table's schema> to debezium_row_schema"
        )
    from pyspark.sql.types import StructType

    return StructType([])


def _schemas(df: DataFrame, column: str) -> list[str]:
    """The distinct Kafka Connect schemas (JSON text) of the messages in ``column``."""
    from pyspark.sql import functions as F

    text = F.get_json_object(F.col(column).cast("string"), "$.schema")
    return [r[0] for r in df.select(text).where(text.isNotNull()).distinct().collect()]


def _types_of(types: Any) -> StructType | None:
    """``types`` (a Table or anything :func:`to_spark_schema` takes) as a StructType."""
    if types is None:
        return None
    schema = getattr(types, "schema", types)  # a method of Table, a property of DeltaTable
    return to_spark_schema(schema() if callable(schema) else schema)


def _with_types(rows: StructType, types: StructType | None) -> StructType:
    """``rows`` with each plain string or number column that ``types`` gives a decimal,
    date or timestamp type taking that type (see :func:`debezium_row_schema`)."""
    from pyspark.sql.types import (
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    if types is None:
        return rows
    given = {f.name: f.dataType for f in types.fields}
    plain = (StringType, DoubleType, FloatType, LongType)
    typed = (DecimalType, DateType, TimestampType, TimestampNTZType)
    out = []
    for f in rows.fields:
        target = given.get(f.name)
        wire = (f.metadata or {}).get(wire_types.WIRE)
        if not wire and isinstance(f.dataType, plain) and isinstance(target, typed):
            f = StructField(f.name, target, f.nullable)
        out.append(f)
    return StructType(out)


def _fail(error: str, text: str | Column, detail: Column) -> Column:
    from pyspark.sql import functions as F

    head = F.lit(text) if isinstance(text, str) else text
    return F.raise_error(F.concat(F.lit(spark_error_message(error, "")), head, detail))
