"""The one secret rule: which settings are secrets, what of settings is recorded, how
settings and texts are shown, and the redaction regex Spark is given."""

from __future__ import annotations

import re

import pytest

from stream_sink.checkpoints import TableIdentity
from stream_sink.secrets import (
    MASK,
    SPARK_DEFAULT_REDACTION,
    SPARK_OPTIONS_REDACTION_REGEX,
    SPARK_REDACTION_REGEX,
    is_secret,
    masked,
    recorded_settings,
    scrub,
    without_passwords,
)

SECRET_NAMES = [
    "header.Authorization",
    "header.X-Api-Key",
    "header.Cookie",
    "header.X-Tenant",  # any header but the public ones: it may authenticate
    "authorization",
    "cookie",
    "credential",
    "token",
    "jdbc.password",
    "s3.secret-access-key",
    "s3.session-token",
    "client.secret-access-key",
    "s3.sse.key",
    "adls.auth.shared-key.account.key",
    "adls.sas-token.myaccount",
    "adls.connection-string.myaccount",
    "gcs.oauth2.token",
    "gcs.private-key",
    "hive.metastore.kerberos.keytab",
    "api_key",
    "fs.s3a.access.key",
]
PLAIN_NAMES = [
    "uri",
    "warehouse",
    "s3.endpoint",
    "s3.region",
    "s3.access-key-id",
    "client.access-key-id",
    "adls.auth.shared-key.account.name",
    "client.refresh-credentials-endpoint",
    "client.refresh-credentials-enabled",
    "s3.session-token-expires-at-ms",
    "fs.s3a.aws.credentials.provider",
    "header.X-Iceberg-Access-Delegation",
    "scope",
    "write.parquet.compression-codec",
    "stream-sink.watermark.orders",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_names_that_hold_a_credential_are_secret(name: str) -> None:
    assert is_secret(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_names_of_places_ids_and_switches_are_not(name: str) -> None:
    assert not is_secret(name)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("jdbc:postgresql://db/ice?user=u&password=pw1", "jdbc:postgresql://db/ice?user=u"),
        ("jdbc:postgresql://db/ice?password=pw1&user=u", "jdbc:postgresql://db/ice?user=u"),
        ("postgresql://u@db/ice?password=pw2", "postgresql://u@db/ice"),
        ("postgresql://u:pw3@db/ice", "postgresql://u@db/ice"),
        (
            "postgresql+psycopg://:pw4@db/ice?sslmode=require",
            "postgresql+psycopg://db/ice?sslmode=require",
        ),
        (
            "jdbc:sqlserver://h;user=u;password=pw5;database=x",
            "jdbc:sqlserver://h;user=u;database=x",
        ),
        (
            "https://acct.blob.core.windows.net/c?sv=2024&sig=pw6%3D",
            "https://acct.blob.core.windows.net/c?sv=2024",
        ),
        ("sqlite:///catalog.db", "sqlite:///catalog.db"),
        ("s3://bucket/warehouse", "s3://bucket/warehouse"),
        (
            "cannot open postgresql://u:pw7@db/x: refused. Retry?",
            "cannot open postgresql://u@db/x: refused. Retry?",
        ),
    ],
)
def test_passwords_leave_every_uri_and_nothing_else_changes(given: str, shown: str) -> None:
    assert without_passwords(given) == shown


def test_recording_keeps_only_what_is_listed_without_passwords() -> None:
    settings = {
        "type": "rest",
        "uri": "https://u:hunter2@catalog.example/api",
        "warehouse": "s3://lake",
        "s3.endpoint": "https://s3.example",
        "s3.access-key-id": "AKIA1",
        "s3.secret-access-key": "sk1",
        "header.Authorization": "Bearer eyJabc",
        "header.X-Api-Key": "k1",
        "adls.auth.shared-key.account.key": "k2",
        "some.future-property": "v",  # not listed: not recorded, whatever it is
    }
    assert recorded_settings(settings) == {
        "type": "rest",
        "uri": "https://u@catalog.example/api",
        "warehouse": "s3://lake",
        "s3.endpoint": "https://s3.example",
    }
    identity = TableIdentity("c", "db.t", "uuid-1", settings)
    assert identity.catalog_settings == recorded_settings(settings)
    recorded = identity.to_json()
    for secret in ("hunter2", "sk1", "eyJabc", "k1", "k2", "AKIA1", "future"):
        assert secret not in recorded


def test_an_older_record_holding_a_secret_is_read_without_it() -> None:
    doc = {
        "catalog": "c",
        "table": "db.t",
        "table-uuid": "u",
        "catalog-settings": {"type": "sql", "uri": "postgresql://u:pw@db/x", "jdbc.password": "pw"},
    }
    identity = TableIdentity.from_dict(doc, where="_table.json")
    assert identity.catalog_settings == {"type": "sql", "uri": "postgresql://u@db/x"}


def test_shown_settings_have_secret_values_masked() -> None:
    shown = masked(
        {
            "header.Authorization": "Bearer eyJabc",
            "uri": "jdbc:postgresql://db/x?password=pw",
            "write.format.default": "parquet",
            "token": "",
        }
    )
    assert shown == {
        "header.Authorization": MASK,
        "uri": "jdbc:postgresql://db/x",
        "write.format.default": "parquet",
        "token": "",
    }


def test_a_message_loses_secret_values_and_their_secret_halves() -> None:
    settings = {
        "credential": "client-id:the-client-secret",
        "header.Authorization": "Bearer eyJtoken123",
        "s3.region": "eu-west-1",
    }
    text = "server said: bad client_secret the-client-secret; Bearer eyJtoken123; eu-west-1"
    assert scrub(text, settings) == f"server said: bad client_secret {MASK}; {MASK}; eu-west-1"
    assert scrub("token eyJtoken123 expired", settings) == f"token {MASK} expired"


def test_sparks_redaction_extends_its_default_and_covers_the_rule() -> None:
    assert SPARK_REDACTION_REGEX.startswith(SPARK_DEFAULT_REDACTION + "|")
    assert SPARK_OPTIONS_REDACTION_REGEX.startswith("(?i)url|")
    spark_conf_keys = [
        "spark.sql.catalog.lake.header.Authorization",
        "spark.sql.catalog.lake.header.X-Api-Key",
        "spark.sql.catalog.lake.credential",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.sql.catalog.lake.adls.auth.shared-key.account.key",
        "spark.sql.catalog.lake.adls.sas-token.acct",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.session.token",
        "spark.kerberos.keytab",
        "spark.sql.catalog.lake.jdbc.password",
        "spark.sql.catalog.lake.apikey",
    ]
    regex = re.compile(SPARK_REDACTION_REGEX)
    assert [k for k in spark_conf_keys if not regex.search(k)] == []
    assert not regex.search("spark.sql.catalog.lake.warehouse")
    assert not regex.search("spark.sql.shuffle.partitions")


def test_the_docs_give_a_cluster_the_regexes_local_session_sets() -> None:
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "operations.md").read_text()
    assert f"spark.redaction.regex              {SPARK_REDACTION_REGEX}\n" in page
    assert f"spark.sql.redaction.options.regex  {SPARK_OPTIONS_REDACTION_REGEX}\n" in page
