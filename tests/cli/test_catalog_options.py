"""The command line's catalog options: ``--catalog-type``, ``--catalog-property``,
``--catalog-properties-file``, ``--catalog-property-env``."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_sink.cli.main import build_parser, main
from stream_sink.cli.table_commands import catalog_properties, catalog_properties_of
from stream_sink.exceptions import InvalidOptionError


def test_properties_split_at_the_first_equals_sign() -> None:
    assert catalog_properties(["s3.endpoint=http://h:1", "header.X=a=b"]) == {
        "s3.endpoint": "http://h:1",
        "header.X": "a=b",
    }
    with pytest.raises(InvalidOptionError, match="KEY=VALUE"):
        catalog_properties(["credential"])


def test_rest_without_a_uri_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["table", "list", "--catalog-type", "rest"]) == 1
    assert "--catalog-type rest needs --catalog-uri" in capsys.readouterr().err


def test_a_secret_property_with_no_value_is_not_echoed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["table", "list", "--catalog-property", "credential"]) == 1
    err = capsys.readouterr().err
    assert "'credential'" in err and "KEY=VALUE" in err


def test_secrets_come_from_a_properties_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not in argv (other users see it in the process list): a file, then the
    environment, then ``--catalog-property``, a later one winning."""
    props = tmp_path / "catalog.properties"
    props.write_text(
        "# the catalog's secrets\n"
        "credential=client:s3cr3t=x\n"
        "header.X-Api-Key = from-file\n"
        "\n"
        "s3.region=eu-west-1\n"
    )
    monkeypatch.setenv("CATALOG_KEY", "from-env")
    args = build_parser().parse_args(
        [
            "table",
            "list",
            "--catalog-properties-file",
            str(props),
            "--catalog-property-env",
            "header.X-Api-Key=CATALOG_KEY",
            "--catalog-property",
            "s3.region=us-east-1",
        ]
    )
    assert catalog_properties_of(args) == {
        "credential": "client:s3cr3t=x",
        "header.X-Api-Key": "from-env",
        "s3.region": "us-east-1",
    }


def test_a_missing_variable_or_a_bad_line_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NO_SUCH_VAR", raising=False)
    assert main(["table", "list", "--catalog-property-env", "credential=NO_SUCH_VAR"]) == 1
    assert "environment variable NO_SUCH_VAR is not set" in capsys.readouterr().err
    bad = tmp_path / "bad.properties"
    bad.write_text("s3.region=eu-west-1\nthe-secret-itself\n")
    assert main(["table", "list", "--catalog-properties-file", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}, line 2: expected KEY=VALUE" in err and "the-secret-itself" not in err
    assert main(["table", "list", "--catalog-properties-file", str(tmp_path / "gone")]) == 1
    assert "cannot be read" in capsys.readouterr().err
