"""``local_session``'s redaction: Spark's own default pattern, extended by the secret
rule (header.Authorization, API keys, Azure account keys, ...), checked by the JVM's
own regex engine against the default of the Spark that runs."""

from __future__ import annotations

from typing import Any

from stream_sink.secrets import SPARK_OPTIONS_REDACTION_REGEX, SPARK_REDACTION_REGEX
from stream_sink.spark.session import LOCAL_DEFAULTS

SECRET_CONF = [
    "spark.sql.catalog.lake.header.Authorization",
    "spark.sql.catalog.lake.header.X-Api-Key",
    "spark.sql.catalog.lake.credential",
    "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
    "spark.sql.catalog.lake.adls.sas-token.acct",
    "spark.hadoop.fs.s3a.secret.key",
]


def test_the_session_redacts_what_spark_does_and_what_the_rule_adds(spark: Any) -> None:
    assert LOCAL_DEFAULTS["spark.redaction.regex"] == SPARK_REDACTION_REGEX
    assert LOCAL_DEFAULTS["spark.sql.redaction.options.regex"] == SPARK_OPTIONS_REDACTION_REGEX
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.redaction.regex") == SPARK_REDACTION_REGEX
    jvm = spark.sparkContext._jvm
    entry = jvm.org.apache.spark.internal.config.ConfigEntry.findEntry("spark.redaction.regex")
    spark_default = entry.defaultValueString()
    assert spark_default.startswith("(?i)secret|password|token|")
    ours = SPARK_REDACTION_REGEX.removeprefix("(?i)").split("|")
    assert [a for a in spark_default.removeprefix("(?i)").split("|") if a not in ours] == []
    pattern = jvm.java.util.regex.Pattern.compile(SPARK_REDACTION_REGEX)
    assert [k for k in SECRET_CONF if not pattern.matcher(k).find()] == []
    assert not pattern.matcher("spark.sql.catalog.lake.warehouse").find()
