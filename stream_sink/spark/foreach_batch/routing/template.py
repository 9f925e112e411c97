"""Tables a routed sink creates on first sight, from ``table_template`` (``create_tables=True``).

A table is created with the template's declared schema for it (an Arrow schema or a
DDL string under ``schemas``), else with the batch's columns that carry values for it;
its identifier fields are the template's (for all tables, or per table), else the key
the rows carry (``from_debezium(key_column=...)``); its partition fields are the
template's whose source column the schema has; its properties the streaming metadata
properties with the template's over them (``format_version`` is ``format-version``).

Invariants: an unknown template key is refused when the sink is made, before any
batch; creating a table another writer created first is not an error (the sink then
writes that table, and does not own it); a missing namespace is created first.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stream_sink.exceptions import AlreadyExistsError, InvalidOptionError
from stream_sink.spark import schema_check
from stream_sink.table.catalog.base import Catalog, table_identifier
from stream_sink.table.catalog.metadata_files import STREAMING_METADATA_PROPERTIES

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableTemplate:
    """How tables are created on first sight (``table_template=dict(...)``)."""

    partition_spec: tuple[Any, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    identifier_fields: Mapping[str, tuple[str, ...]] | tuple[str, ...] = ()
    schemas: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> TableTemplate:
        raw = dict(raw or {})
        known = {"partition_spec", "properties", "identifier_fields", "schemas", "format_version"}
        unknown = set(raw) - known
        if unknown:
            raise InvalidOptionError(
                f"table_template has unknown keys {sorted(unknown)}; known: partition_spec, "
                "properties, identifier_fields, schemas, format_version"
            )
        props = {str(k): str(v) for k, v in (raw.get("properties") or {}).items()}
        if raw.get("format_version") is not None:
            props["format-version"] = str(int(raw["format_version"]))
        ids = raw.get("identifier_fields") or ()
        ids = {k: tuple(v) for k, v in ids.items()} if isinstance(ids, Mapping) else tuple(ids)
        return TableTemplate(
            tuple(raw.get("partition_spec") or ()),
            props,
            ids,
            dict(raw.get("schemas") or {}),
        )

    def keys_for(self, name: str, from_data: Sequence[str]) -> tuple[str, ...]:
        if isinstance(self.identifier_fields, Mapping):
            return tuple(self.identifier_fields.get(name, ())) or tuple(from_data)
        return tuple(self.identifier_fields) or tuple(from_data)

    def create(
        self,
        catalog: Catalog,
        name: str,
        spark_schema: StructType,
        columns: frozenset[str],
        key: Sequence[str],
        sink_id: str,
    ) -> bool:
        """Create table ``name`` for rows of ``spark_schema`` whose ``columns`` carry
        values (``key``: the key the rows carry); False when another writer created it
        first."""
        from stream_sink.table.arrow import schema_from_arrow

        declared = self.schemas.get(name)
        if declared is not None:
            arrow = declared if isinstance(declared, pa.Schema) else _ddl_to_arrow(declared)
        else:
            data = schema_check.spark_to_arrow(spark_schema, name)
            arrow = pa.schema([f for f in data if f.name in columns])
        keys = self.keys_for(name, key)
        schema = schema_from_arrow(arrow, list(keys) or None)
        spec = [p for p in self.partition_spec if schema.has_field(p[1])]
        ensure_namespace(catalog, name)
        try:
            catalog.create_table(
                name,
                schema,
                spec or None,
                properties={**STREAMING_METADATA_PROPERTIES, **self.properties},
            )
            log.info("sink %s: created table %s (key %s)", sink_id, name, keys)
            return True
        except AlreadyExistsError:
            return False


def ensure_namespace(catalog: Catalog, name: str) -> None:
    """Create the namespace of table ``name`` unless it exists (or another writer
    creates it meanwhile)."""
    namespace = table_identifier(name)[:-1]
    if not catalog.namespace_exists(namespace):
        with contextlib.suppress(AlreadyExistsError):
            catalog.create_namespace(namespace)


def _ddl_to_arrow(ddl: str) -> pa.Schema:
    from stream_sink.spark.cdc.debezium import to_spark_schema

    return schema_check.spark_to_arrow(to_spark_schema(ddl), "table_template")
