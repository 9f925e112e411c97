"""The Hadoop catalog: Java HadoopCatalog's directory layout, version hints that lag
or break, compressed metadata written by Java, and what the catalog refuses.
Behaviour shared with the SQL catalog is tested in test_catalog_sql.py.

Tests stream_sink.table.catalog.hadoop: the Hadoop catalog."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from peers.readers import JAVA_ICEBERG, run_peer

import stream_sink
from stream_sink.exceptions import (
    CommitFailedError,
    InvalidOptionError,
    NoSuchTableError,
    TableAlreadyExistsError,
    UnsupportedError,
)
from stream_sink.table.catalog import Catalog, HadoopCatalog
from stream_sink.table.schema import Schema
from stream_sink.table.types import LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
)


@pytest.fixture
def hadoop(tmp_path: Path) -> HadoopCatalog:
    cat = stream_sink.load_catalog("hc", type="hadoop", warehouse=str(tmp_path / "wh"))
    assert isinstance(cat, HadoopCatalog)
    cat.create_namespace("db")
    return cat


def set_property(cat: Catalog, name: str, key: str, value: str) -> str:
    table = cat.load_table(name)
    new = table.metadata.with_properties({key: value})
    return cat.commit(table.identifier, table.metadata_location, new)


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_java_layout(hadoop: HadoopCatalog, tmp_path: Path) -> None:
    hadoop.create_table(("db", "events"), SCHEMA)
    set_property(hadoop, "db.events", "k", "v")

    table_dir = tmp_path / "wh" / "db" / "events"
    assert listing(table_dir / "metadata") == [
        "v1.metadata.json",
        "v2.metadata.json",
        "version-hint.text",
    ]
    assert (table_dir / "metadata" / "version-hint.text").read_text() == "2"
    v2 = json.loads((table_dir / "metadata" / "v2.metadata.json").read_text())
    assert v2["location"] == str(table_dir)
    assert [e["metadata-file"] for e in v2["metadata-log"]] == [
        str(table_dir / "metadata" / "v1.metadata.json")
    ]


def test_lagging_hint_is_probed_forward(hadoop: HadoopCatalog, tmp_path: Path) -> None:
    hadoop.create_table("db.t", SCHEMA)
    set_property(hadoop, "db.t", "a", "1")
    set_property(hadoop, "db.t", "b", "2")
    metadata = tmp_path / "wh" / "db" / "t" / "metadata"
    (metadata / "version-hint.text").write_text("1")  # a writer died before updating it

    assert hadoop.current_metadata_location("db.t").endswith("/v3.metadata.json")
    assert set_property(hadoop, "db.t", "c", "3").endswith("/v4.metadata.json")
    assert (metadata / "version-hint.text").read_text() == "4"


@pytest.mark.parametrize("hint", ["garbage", "", None, "99"])
def test_broken_or_missing_hint_falls_back_to_listing(
    hadoop: HadoopCatalog, tmp_path: Path, hint: str | None
) -> None:
    hadoop.create_table("db.t", SCHEMA)
    set_property(hadoop, "db.t", "a", "1")
    hint_file = tmp_path / "wh" / "db" / "t" / "metadata" / "version-hint.text"
    if hint is None:
        hint_file.unlink()
    else:
        hint_file.write_text(hint)
    assert hadoop.load_table("db.t").properties["a"] == "1"
    assert hadoop.current_metadata_location("db.t").endswith("/v2.metadata.json")


@pytest.mark.parametrize("name", ["v2.gz.metadata.json", "v2.metadata.json.gz"])
def test_reads_gzip_metadata_named_as_java_does(
    hadoop: HadoopCatalog, tmp_path: Path, name: str
) -> None:
    table = hadoop.create_table("db.t", SCHEMA)
    metadata = tmp_path / "wh" / "db" / "t" / "metadata"
    doc = json.loads(Path(table.metadata_location).read_text())
    doc["properties"] = {"written-by": "java"}
    (metadata / name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    (metadata / "version-hint.text").write_text("2")

    loaded = hadoop.load_table("db.t")
    assert loaded.metadata_location == str(metadata / name)
    assert loaded.properties["written-by"] == "java"
    assert set_property(hadoop, "db.t", "k", "v").endswith("/v3.metadata.json")


def test_commit_against_a_missing_table(hadoop: HadoopCatalog) -> None:
    table = hadoop.create_table("db.t", SCHEMA)
    hadoop.drop_table("db.t")
    with pytest.raises(NoSuchTableError):
        hadoop.commit(
            table.identifier,
            table.metadata_location,
            table.metadata.with_properties({"k": "v"}),
            base_metadata=table.metadata,
        )


def test_no_temp_files_survive_a_lost_race(hadoop: HadoopCatalog, tmp_path: Path) -> None:
    first = hadoop.create_table("db.t", SCHEMA)
    set_property(hadoop, "db.t", "winner", "1")
    with pytest.raises(CommitFailedError):
        hadoop.commit(
            first.identifier,
            first.metadata_location,
            first.metadata.with_properties({"loser": "1"}),
            base_metadata=first.metadata,
        )
    assert listing(tmp_path / "wh" / "db" / "t" / "metadata") == [
        "v1.metadata.json",
        "v2.metadata.json",
        "version-hint.text",
    ]


def test_refusals(hadoop: HadoopCatalog, tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match=r"SQL catalog.*or a REST catalog"):
        stream_sink.load_catalog("x", type="hadoop", warehouse="s3://bucket/wh")
    with pytest.raises(InvalidOptionError, match="<warehouse>/<namespace>/<table>"):
        hadoop.create_table("db.t", SCHEMA, location=str(tmp_path / "elsewhere"))
    hadoop.create_table("db.t", SCHEMA)
    with pytest.raises(UnsupportedError, match="rename"):
        hadoop.rename_table("db.t", "db.u")
    with pytest.raises(UnsupportedError, match="properties"):
        hadoop.create_namespace("other", {"owner": "me"})
    hadoop.create_namespace(("db", "inner"))
    (tmp_path / "wh" / "db" / "inner" / "file.txt").write_text("x")
    with pytest.raises(TableAlreadyExistsError, match="namespace"):
        hadoop.create_table("db.inner", SCHEMA)


def test_file_uri_and_relative_warehouse_are_one_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = stream_sink.load_catalog("a", type="hadoop", warehouse="wh")
    relative.create_namespace("db")
    relative.create_table("db.t", SCHEMA)
    as_uri = stream_sink.load_catalog("b", type="hadoop", warehouse=f"file://{tmp_path}/wh/")
    expected = tmp_path / "wh" / "db" / "t" / "metadata" / "v1.metadata.json"
    assert as_uri.current_metadata_location("db.t") == str(expected)


# --- Apache Iceberg Java's HadoopCatalog on the same warehouse ----------------------------


@pytest.mark.interop
@pytest.mark.skipif(
    not JAVA_ICEBERG.exists() or shutil.which("bash") is None,
    reason="java-iceberg launcher not present",
)
def test_java_hadoop_catalog_and_we_share_tables(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    ours = stream_sink.load_catalog("hc", type="hadoop", warehouse=str(warehouse))
    ours.create_namespace("db")
    ours.create_table("db.ours", SCHEMA)
    set_property(ours, "db.ours", "from-python", "yes")

    out = run_peer(
        [
            "sql",
            "--warehouse",
            str(warehouse),
            "CREATE TABLE hc.db.theirs (id bigint, name string) USING iceberg",
            "INSERT INTO hc.db.theirs VALUES (1, 'a'), (2, 'b')",
            "ALTER TABLE hc.db.ours SET TBLPROPERTIES ('from-java' = 'yes')",
            "SHOW TBLPROPERTIES hc.db.ours",
        ],
        JAVA_ICEBERG,
    )
    java_sees = {
        row["key"]: row["value"]
        for row in (json.loads(line) for line in out.splitlines() if line.startswith("{"))
    }
    assert java_sees["from-python"] == "yes"

    table = ours.load_table("db.ours")  # Java committed v3 on top of our v2
    assert table.metadata_location.endswith("/db/ours/metadata/v3.metadata.json")
    assert table.properties["from-python"] == "yes" and table.properties["from-java"] == "yes"

    theirs = ours.load_table("db.theirs")
    assert [f.name for f in theirs.schema().fields] == ["id", "name"]
    snapshot = theirs.current_snapshot()
    assert snapshot is not None and snapshot.summary["added-records"] == "2"
    assert sorted(t[-1] for t in ours.list_tables("db")) == ["ours", "theirs"]
    version = int((warehouse / "db/theirs/metadata/version-hint.text").read_text())
    assert set_property(ours, "db.theirs", "k", "v").endswith(f"/v{version + 1}.metadata.json")
