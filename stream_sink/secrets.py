"""The one rule for secrets in settings: which settings hold one, what of a set of
settings may be recorded, and how settings and texts are shown.

Every place that records, prints, pickles or logs catalog or storage settings goes
through this module: the checkpoints' and state's table record
(:func:`recorded_settings`), ``stream-sink status`` and ``table show``
(:func:`masked`), reprs and error messages (:func:`without_passwords`, :func:`scrub`),
the REST catalog's headers for executors (:func:`is_secret`), and Spark's redaction
regex (:data:`SPARK_REDACTION_REGEX`).

Invariants:
- Recording is allow-listed: a setting is recorded only when its name is in
  :data:`RECORDED` (what opens a catalog or a table again and is no credential), and
  its value without any password (:func:`without_passwords`). A setting nobody listed
  is never recorded, whatever it is called.
- A setting is secret (:func:`is_secret`) when its name is ``header.*`` (but a header
  named in :data:`PUBLIC_HEADERS`), or says password, secret, token, credential,
  authorization, cookie, sas, private, keytab, signature or connection string, or ends
  in ``key`` (``s3.sse.key``, ``adls.auth.shared-key.account.key``); names ending in
  ``-id``, ``-enabled``, ``-endpoint``, ``-uri``, ``-url``, ``-ms``, ``.provider`` or
  ``.name`` (``s3.access-key-id``, ``client.refresh-credentials-endpoint``) name no
  secret. Shown, a secret's value is :data:`MASK`.
- A password in a URI is removed wherever the URI is recorded or shown: the user
  info's (``postgresql://u:pw@db/ice`` → ``postgresql://u@db/ice``) and every
  query-string or ``;``-parameter whose name is secret (``?password=…``, ``;pwd=…``,
  ``&sig=…``).
- :data:`SPARK_REDACTION_REGEX` starts with Spark's own default (pyspark 3.5's
  ``(?i)secret|password|token|access[.]?key``; 4.x adds ``credential``), so it extends
  it, and adds what :func:`is_secret` covers beyond it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MASK = "****"

PUBLIC_HEADERS = frozenset({"x-iceberg-access-delegation", "user-agent", "accept-language"})
"""Headers (``header.<name>``, compared without case) that carry no credential."""

RECORDED = frozenset(
    {
        "type",
        "uri",
        "warehouse",
        "location",
        "s3.endpoint",
        "s3.region",
        "s3.path-style-access",
        "client.region",
        "jdbc.user",
        "sqlite.busy-timeout-ms",
        "oauth2-server-uri",
        "scope",
        "audience",
        "resource",
        "rest.sigv4-enabled",
        "rest.signing-name",
        "rest.signing-region",
        "rest.max-retries",
        "rest.retry-max-wait-ms",
        "rest.request-timeout-ms",
    }
)
"""The settings a sink records to open its catalog (or Delta table) again: kinds,
places, endpoints and tuning; never a credential."""

_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "tokens",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "cookies",
        "sas",
        "private",
        "keytab",
        "signature",
        "sig",
    }
)
_SECRET_PHRASES = ("connection-string", "connectionstring", "privatekey", "sastoken")
_PLAIN_SUFFIXES = ("-id", "-enabled", "-endpoint", "-uri", "-url", "-ms", ".provider", ".name")
_WORD = re.compile(r"[.\-/: ]+")

SPARK_DEFAULT_REDACTION = r"(?i)secret|password|token|access[.]?key"
"""pyspark 3.5's ``spark.redaction.regex`` default (4.x appends ``|credential``)."""
SPARK_REDACTION_REGEX = (
    SPARK_DEFAULT_REDACTION
    + "|"
    + "|".join(
        (
            "credential",
            "passwd",
            "authorization",
            "cookie",
            r"header[.]",
            r"api[-_.]?key",
            r"account[.]key",
            r"shared[-_.]?key",
            r"sas[-_.]token",
            r"private[-_.]?key",
            "keytab",
            r"connection[-_.]?string",
        )
    )
)
"""What Spark redacts (names and values it matches) in its UI, plans and event logs:
Spark's default, extended."""
SPARK_OPTIONS_REDACTION_REGEX = "(?i)url|" + SPARK_REDACTION_REGEX.removeprefix("(?i)")
"""``spark.sql.redaction.options.regex``: Spark's default ``(?i)url``, extended."""


def is_secret(key: str) -> bool:
    """Whether a setting named ``key`` holds a credential (see the module's rule)."""
    low = key.strip().lower().replace("_", "-")
    if low.startswith("header."):
        return low[len("header.") :] not in PUBLIC_HEADERS
    if low.endswith(_PLAIN_SUFFIXES):
        return False
    if any(word in _SECRET_WORDS for word in _WORD.split(low)):
        return True
    return any(p in low for p in _SECRET_PHRASES) or low.endswith("key")


def recorded_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """What of ``settings`` may be recorded: the allow-listed names, passwords removed
    from their values."""
    return {
        k: without_passwords(v)
        for k, v in sorted(settings.items())
        if k in RECORDED and not is_secret(k)
    }


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` as they may be shown: secret values :data:`MASK`, every other
    value without passwords."""
    return {
        k: MASK if is_secret(k) and v else without_passwords(str(v)) for k, v in settings.items()
    }


_URI = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*:[^\s'\"<>]+")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s:@?#]*):[^/\s@?#]*@")
_SEPARATORS = re.compile(r"([?&;])")


def without_passwords(text: str) -> str:
    """``text`` (a URI, or a message quoting URIs) with every URI's user-info password
    and every secret query-string or ``;`` parameter removed."""
    return _URI.sub(lambda m: _uri_without_passwords(m[0]), text)


def _uri_without_passwords(uri: str) -> str:
    uri = _USERINFO.sub(lambda m: f"{m[1]}{m[2]}@" if m[2] else m[1], uri)
    head, *rest = _SEPARATORS.split(uri)
    out = [head]
    query, started = False, False
    for sep, part in zip(rest[::2], rest[1::2], strict=True):
        query = query or sep == "?"
        name, eq, _ = part.partition("=")
        if eq and is_secret(name):
            continue
        if query and not started and sep in "?&":
            sep, started = "?", True
        out += [sep, part]
    return "".join(out)


def scrub(text: str, settings: Mapping[str, str]) -> str:
    """``text`` with the value of every secret setting masked, and its secret parts:
    what follows the first ``:`` (the client secret of a ``client_id:client_secret``
    credential) or the first space (the token of ``Bearer <token>``), and the secret
    parameters of a query-like value (a SAS token's ``sig``); then without passwords.
    Parts shorter than 4 characters are left (they would mask ordinary words)."""
    parts: set[str] = set()
    for key, value in settings.items():
        if not value or not is_secret(key):
            continue
        parts.add(value)
        for sep in (":", " "):
            if sep in value:
                parts.add(value.split(sep, 1)[1])
        for param in re.split(r"[&;]", value):  # a SAS token: its signature
            name, eq, part = param.partition("=")
            if eq and is_secret(name):
                parts.add(part)
    for part in sorted(parts, key=len, reverse=True):
        if len(part) >= 4:
            text = text.replace(part, MASK)
    return without_passwords(text)
