"""Metrics modes from table properties, as Java's MetricsConfig resolves them."""

from __future__ import annotations

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.table.metrics_config import (
    COUNTS,
    DEFAULT_MODE,
    DELETE_FILE_PATH_ID,
    DELETE_FILE_POS_ID,
    FULL,
    NONE,
    MetricsConfig,
    MetricsMode,
    limited_field_ids,
    validate_properties,
)
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)


def _schema() -> Schema:
    return Schema(
        NestedField(1, "id", LongType(), True),
        NestedField(2, "name", StringType()),
        NestedField(
            3,
            "addr",
            StructType(NestedField(4, "city", StringType()), NestedField(5, "zip", StringType())),
        ),
        NestedField(6, "tags", ListType(7, StringType())),
        NestedField(8, "props", MapType(9, StringType(), 10, LongType())),
    )


def _wide(n: int) -> Schema:
    return Schema(*(NestedField(i, f"c{i}", LongType()) for i in range(1, n + 1)))


def test_default_is_truncate_16() -> None:
    config = MetricsConfig.from_properties({}, _schema())
    assert config.mode_for(1) == MetricsMode("truncate", 16)
    assert config.mode_for(4) == DEFAULT_MODE
    assert str(config.mode_for(2)) == "truncate(16)"


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("none", NONE),
        ("Counts", COUNTS),
        ("FULL", FULL),
        ("truncate(8)", MetricsMode("truncate", 8)),
        ("TRUNCATE(1)", MetricsMode("truncate", 1)),
    ],
)
def test_parse_modes(text: str, mode: MetricsMode) -> None:
    assert MetricsMode.parse(text, "test") == mode


def test_configured_default_and_column_overrides() -> None:
    props = {
        "write.metadata.metrics.default": "counts",
        "write.metadata.metrics.column.name": "full",
        "write.metadata.metrics.column.addr.city": "truncate(4)",
    }
    config = MetricsConfig.from_properties(props, _schema())
    assert config.mode_for(1) == COUNTS
    assert config.mode_for(2) == FULL
    assert config.mode_for(4) == MetricsMode("truncate", 4)
    assert config.mode_for(5) == COUNTS
    assert not config.mode_for(1).has_bounds and config.mode_for(1).has_counts


@pytest.mark.parametrize(
    "key",
    ["write.metadata.metrics.default", "write.metadata.metrics.column.name"],
)
@pytest.mark.parametrize("bad", ["truncate(0)", "truncate(-1)", "bogus", "truncate(x)"])
def test_bad_mode_names_the_property(key: str, bad: str) -> None:
    with pytest.raises(InvalidOptionError, match=key.replace(".", r"\.")):
        MetricsConfig.from_properties({key: bad}, _schema())


def test_wide_tables_get_metrics_for_the_first_100_columns_only() -> None:
    config = MetricsConfig.from_properties({}, _wide(150))
    assert config.mode_for(1) == DEFAULT_MODE
    assert config.mode_for(100) == DEFAULT_MODE
    assert config.mode_for(101) == NONE
    assert config.mode_for(150) == NONE


def test_explicit_column_setting_beats_the_inferred_limit() -> None:
    props = {"write.metadata.metrics.column.c120": "full"}
    config = MetricsConfig.from_properties(props, _wide(150))
    assert config.mode_for(120) == FULL
    assert config.mode_for(121) == NONE


def test_max_inferred_column_defaults_property() -> None:
    props = {"write.metadata.metrics.max-inferred-column-defaults": "3"}
    config = MetricsConfig.from_properties(props, _wide(5))
    assert [config.mode_for(i) for i in range(1, 6)] == [DEFAULT_MODE] * 3 + [NONE] * 2
    # a configured default applies everywhere, whatever the width
    props["write.metadata.metrics.default"] = "full"
    assert MetricsConfig.from_properties(props, _wide(5)).mode_for(5) == FULL
    # negative falls back to 100, as in Java
    negative = {"write.metadata.metrics.max-inferred-column-defaults": "-1"}
    assert MetricsConfig.from_properties(negative, _wide(5)).mode_for(5) == DEFAULT_MODE


def test_non_integer_max_inferred_is_refused() -> None:
    with pytest.raises(InvalidOptionError, match="max-inferred-column-defaults"):
        MetricsConfig.from_properties(
            {"write.metadata.metrics.max-inferred-column-defaults": "many"}, _wide(2)
        )


def test_limited_ids_take_each_structs_primitives_before_nested_ones() -> None:
    # Java's limitFieldIds: id, name (top-level primitives), then addr's, then collections
    assert limited_field_ids(_schema(), 3) == [1, 2, 4]
    assert limited_field_ids(_schema(), 100) == [1, 2, 4, 5, 7, 9, 10]


def test_sort_columns_keep_bounds_under_counts_default() -> None:
    props = {"write.metadata.metrics.default": "counts"}
    config = MetricsConfig.from_properties(props, _schema(), sort_columns=["name"])
    assert config.mode_for(2) == DEFAULT_MODE
    props["write.metadata.metrics.column.name"] = "none"
    assert MetricsConfig.from_properties(props, _schema(), ["name"]).mode_for(2) == NONE


def test_unknown_columns_are_ignored_when_writing_but_reported_by_validation() -> None:
    props = {"write.metadata.metrics.column.gone": "full"}
    assert MetricsConfig.from_properties(props, _schema()).mode_for(1) == DEFAULT_MODE
    with pytest.raises(InvalidOptionError, match="gone"):
        validate_properties(props, _schema())
    validate_properties({"write.metadata.metrics.column.addr.zip": "none"}, _schema())


def test_position_delete_config() -> None:
    config = MetricsConfig.for_position_deletes()
    assert config.mode_for(DELETE_FILE_PATH_ID) == FULL
    assert config.mode_for(DELETE_FILE_POS_ID) == FULL
    assert config.mode_for(1) == NONE
