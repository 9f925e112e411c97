"""Spark's own ``s3a://`` filesystem (for its ``checkpointLocation`` on an object store):
which jars it needs and the Hadoop settings that point it at an S3-compatible store.

Invariants:
- The jars are hadoop-aws at exactly the Hadoop version of the running pyspark (its
  ``jars/hadoop-client-api-<version>.jar``) and the AWS SDK bundle hadoop-aws depends
  on. They are resolved by Maven (``scripts/s3a-jars.sh``), never downloaded here; this
  module only reads the list that script leaves in :func:`jar_list_file`.
- The settings come from the same ``s3.*`` properties as the sink's FileIO
  (``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.region``), so one
  property map serves the catalog, the sink's checkpoints and Spark's. Without keys,
  s3a takes the AWS credential chain (environment, profile, instance role).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from stream_sink.exceptions import InvalidOptionError
from stream_sink.io.endpoint import ENDPOINT, endpoint_parts, endpoint_url

JARS_SCRIPT = "scripts/s3a-jars.sh"


def jar_list_file(hadoop_version: str) -> Path:
    """Where ``scripts/s3a-jars.sh`` keeps the comma-separated jars for a Hadoop version."""
    home = os.environ.get("STREAM_SINK_S3A_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "stream-sink" / "s3a"
    return base / f"hadoop-{hadoop_version}.jars"


def hadoop_version(spark_jars_dir: str | os.PathLike[str]) -> str:
    """The Hadoop version pyspark bundles, from its ``hadoop-client-api-<v>.jar``."""
    for jar in sorted(Path(spark_jars_dir).glob("hadoop-client-api-*.jar")):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise InvalidOptionError(
        f"s3a: no hadoop-client-api jar in {spark_jars_dir}, so the Hadoop version for "
        "hadoop-aws is unknown; set spark.jars to hadoop-aws of your Spark's Hadoop version "
        "and its AWS SDK bundle instead of s3a=True"
    )


def s3a_jars(hadoop_version: str) -> list[str]:
    """The resolved jars for ``hadoop_version``; an error saying how to resolve them when
    they are missing (nothing is fetched here)."""
    listing = jar_list_file(hadoop_version)
    jars = listing.read_text().strip().split(",") if listing.exists() else []
    missing = [j for j in jars if not Path(j).is_file()]
    if not jars or missing:
        raise InvalidOptionError(
            f"s3a: the jars for Hadoop {hadoop_version} are not resolved "
            f"({'missing ' + missing[0] if missing else f'no list at {listing}'}); run "
            f"`{JARS_SCRIPT} {hadoop_version}` (Maven resolves hadoop-aws {hadoop_version} "
            "and the AWS SDK bundle into ~/.m2), or set spark.jars yourself"
        )
    return jars


def s3a_settings(props: Mapping[str, str]) -> dict[str, str]:
    """Spark conf entries (``spark.hadoop.fs.s3a.*``) for the store that ``s3.*``
    ``props`` name: endpoint (path-style, TLS as its scheme says, and on when it names
    none: :mod:`stream_sink.io.endpoint`), region and keys."""
    conf: dict[str, str] = {}
    endpoint = endpoint_url({ENDPOINT: props[ENDPOINT]}) if props.get(ENDPOINT) else None
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        conf["fs.s3a.path.style.access"] = "true"  # S3-compatible stores: no bucket DNS
        tls = endpoint_parts(endpoint)[0] == "https"
        conf["fs.s3a.connection.ssl.enabled"] = str(tls).lower()
    if props.get("s3.region"):
        conf["fs.s3a.endpoint.region"] = props["s3.region"]
    if props.get("s3.access-key-id") and props.get("s3.secret-access-key"):
        conf["fs.s3a.access.key"] = props["s3.access-key-id"]
        conf["fs.s3a.secret.key"] = props["s3.secret-access-key"]
        conf["fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        )
    return {f"spark.hadoop.{k}": v for k, v in conf.items()}
