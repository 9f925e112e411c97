"""An S3 endpoint as every client here reads it (pyarrow, boto3, Spark's s3a).

Invariant: an ``s3.endpoint`` without a scheme (``minio:9000``) is HTTPS, as the AWS
SDKs and Iceberg Java's S3FileIO read it; plain HTTP only when the endpoint says
``http://``. No client turns TLS off for an endpoint that did not ask for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

ENDPOINT = "s3.endpoint"


def endpoint_url(properties: Mapping[str, str]) -> str | None:
    """``s3.endpoint`` (else ``AWS_ENDPOINT_URL``) as a URL with its scheme; None when
    neither is set (AWS itself)."""
    raw = (properties.get(ENDPOINT) or os.environ.get("AWS_ENDPOINT_URL") or "").strip()
    if not raw:
        return None
    return raw if "://" in raw else f"https://{raw}"


def endpoint_parts(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) of an endpoint URL from :func:`endpoint_url`."""
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc
