"""Spark's s3a:// filesystem: the Hadoop version is pyspark's own, the jars list is the
one scripts/s3a-jars.sh left (missing: an error saying how to resolve them), and the
settings point s3a at the store the ``s3.*`` properties name."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.io.s3a import hadoop_version, s3a_jars, s3a_settings


def test_hadoop_version_is_that_of_pysparks_client_jar(tmp_path: Path) -> None:
    (tmp_path / "hadoop-client-api-3.4.1.jar").touch()
    (tmp_path / "hadoop-client-runtime-3.4.1.jar").touch()
    assert hadoop_version(tmp_path) == "3.4.1"
    with pytest.raises(InvalidOptionError, match="no hadoop-client-api jar"):
        hadoop_version(tmp_path / "nowhere")


def test_jars_come_from_the_resolved_list_or_an_error_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAM_SINK_S3A_HOME", str(tmp_path))
    with pytest.raises(InvalidOptionError, match=r"scripts/s3a-jars\.sh 9\.9\.9"):
        s3a_jars("9.9.9")
    jar = tmp_path / "hadoop-aws-9.9.9.jar"
    (tmp_path / "hadoop-9.9.9.jars").write_text(f"{jar}\n")
    with pytest.raises(InvalidOptionError, match="missing"):
        s3a_jars("9.9.9")  # listed but gone (a cleaned ~/.m2)
    jar.touch()
    assert s3a_jars("9.9.9") == [str(jar)]


def test_settings_from_the_s3_properties() -> None:
    conf = s3a_settings(
        {
            "s3.endpoint": "http://127.0.0.1:8333",
            "s3.access-key-id": "ak",
            "s3.secret-access-key": "sk",
            "s3.region": "eu-west-1",
        }
    )
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "sk"
    assert s3a_settings({}) == {}  # AWS itself, the default credential chain
