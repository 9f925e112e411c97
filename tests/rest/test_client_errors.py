"""What a REST catalog's error says: the server's message, with no secret of the
catalog's properties in it, nor the secret half of ``credential``."""

from __future__ import annotations

from stream_sink.exceptions import CatalogAuthError, CatalogRequestError
from stream_sink.table.catalog.rest.client import Response, raise_for

PROPS = {
    "uri": "https://catalog.example",
    "credential": "client-7:the-client-secret",
    "header.X-Api-Key": "api-key-31d9",
    "adls.sas-token.lakeacct": "sv=2024&sig=c2FzLXNpZw",
}


def error(status: int, message: str) -> Exception:
    body = {"error": {"type": "BadRequestException", "message": message, "code": status}}
    url = "https://catalog.example/v1/namespaces/ns/tables/t"
    return raise_for("lake", Response(status, body, {}), "GET", url, "load table ns.t", PROPS)


def test_a_server_message_echoing_secrets_is_quoted_without_them() -> None:
    e = error(400, "bad client: client_secret=the-client-secret, key api-key-31d9, c2FzLXNpZw")
    assert isinstance(e, CatalogRequestError)
    text = str(e) + e.server_message
    for secret in ("the-client-secret", "api-key-31d9", "c2FzLXNpZw"):
        assert secret not in text
    assert "bad client" in text and "400 BadRequestException" in text


def test_a_refusal_names_what_to_check_and_no_secret() -> None:
    e = error(401, "credential client-7:the-client-secret was revoked")
    assert isinstance(e, CatalogAuthError)
    assert "the-client-secret" not in str(e) and "'credential'" in str(e)
