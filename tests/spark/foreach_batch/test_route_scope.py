"""Where a routed sink may write (``IcebergSink(table_column=..., namespaces=...,
tables=...)``), checked without Spark: the names a source's events carry are confined to
the namespaces and tables the operator names, validated for every catalog, and a
TRUNCATE is honoured only for a table the sink owns. ``test_routing.py`` runs the
same rules through a streaming query."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import stream_sink as ss
from stream_sink.exceptions import InvalidOptionError
from stream_sink.spark import IcebergSink
from stream_sink.spark.foreach_batch.routing.scope import RouteScope

SCOPE = RouteScope.parse(["inv", "a.b"], ["finance.ledger"], "errors.dead")


@pytest.mark.parametrize("name", ["inv.customers", "a.b.t", "finance.ledger"])
def test_tables_in_the_namespaces_or_given_by_name_may_be_written(name: str) -> None:
    assert SCOPE.problem(name) is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("finance.payroll", "in namespace 'finance', outside this sink's namespaces"),
        ("shop.items", "add 'shop' to namespaces= \\(or 'shop.items' to tables=\\)"),
        ("inv.customers.metadata", "in namespace 'inv.customers', outside"),
        ("a.t", "in namespace 'a', outside"),
        ("a.b.c.t", "in namespace 'a.b.c', outside"),
        ("inv.a/b", "a part of it holds '/'"),
        ("inv..x", "a part of it is empty"),
        ("inv.x\x1fy", "control character U\\+001F"),
        ("inv.x\ny", "control character U\\+000A"),
        ("inv.\x85", "control character U\\+0085"),
        ("customers", "not a table name such as 'db.table'"),
        ("errors.dead", "names the dead-letter table"),
    ],
    ids=["another namespace", "the fix", "a dotted table name", "a parent namespace",
         "a child namespace", "a slash", "an empty part", "the unit separator", "a newline",
         "a C1 control", "no namespace", "the dead-letter table"],
)  # fmt: skip
def test_names_outside_the_scope_or_unfit_for_a_catalog_are_refused(
    name: str, message: str
) -> None:
    problem = SCOPE.problem(name)
    assert problem is not None
    assert re.search(message, problem), problem


def test_a_truncate_is_honoured_only_for_tables_the_sink_created_or_was_given() -> None:
    assert SCOPE.truncate_refusal("inv.mine", created=True) is None
    assert SCOPE.truncate_refusal("finance.ledger", created=False) is None
    refusal = SCOPE.truncate_refusal("inv.customers", created=False)
    assert refusal is not None
    assert (
        "neither created nor was given" in refusal and "add 'inv.customers' to tables=" in refusal
    )


def _sink(tmp_path: Path, **kwargs: object) -> IcebergSink:
    catalog = ss.load_catalog("scope", type="hadoop", warehouse=str(tmp_path / "wh"))
    return IcebergSink(
        catalog=catalog,
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_routed_sink_needs_the_namespaces_or_tables_it_may_write(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match=r"pass namespaces=\[\.\.\.\]") as e:
        _sink(tmp_path, table_column="_table", create_tables=True)
    assert "tables=[...]" in str(e.value)
    assert _sink(tmp_path, table_column="_table", namespaces=["inv"]).sink_id == "routed-_table"
    assert _sink(tmp_path, table_column="_table", tables=["inv.customers"]) is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"namespaces": ["inv/x"]}, "namespaces: 'inv/x' has a part that holds '/'"),
        ({"namespaces": ["inv..x"]}, "namespaces: 'inv..x' is not a name"),
        ({"tables": ["customers"]}, "must each be 'namespace.table'"),
        ({"namespaces": ["inv"], "dead_letter_table": "errors.\x00dead"}, "control character"),
    ],
)
def test_unfit_names_in_the_options_are_refused(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        _sink(tmp_path, table_column="_table", **kwargs)


def test_namespaces_and_tables_need_a_routed_sink(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="need table_column="):
        _sink(tmp_path, table="db.t", namespaces=["db"])
