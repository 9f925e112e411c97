"""The command line's catalog options: ``--catalog-type``, ``--catalog-property``."""

from __future__ import annotations

import pytest

from stream_sink.cli.main import main
from stream_sink.cli.table_commands import catalog_properties
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
