"""The catalog clients of ``format("stream_sink")`` on the driver: one per Python worker
process and catalog configuration, kept across Spark's calls.

Spark asks a Python worker on the driver for a writer several times per micro-batch,
and commits each batch in one; it reuses those processes. Opening the catalog for each
call would cost, on a REST catalog, a ``GET /v1/config``, an OAuth2 token request and
a connection each time; a kept client costs only the requests the call itself needs.

Invariants:
- A client is shared only by calls with the same catalog name and properties.
- Nothing the table says is kept: every caller loads the table it needs, so each
  micro-batch sees the table's current schema, spec and vended credentials. The client
  keeps only what it keeps within one batch too: the server's config and its OAuth2
  token, which it renews when due (before handing it to executors) and after a 401.
- A client whose use raised is closed and forgotten: the next call opens a new one (a
  server that restarted, a connection that broke, a token that can no longer be renewed).
- At most ``MAX_KEPT`` clients are kept; opening one more closes the least recently used.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

MAX_KEPT = 8
Key = tuple[str, tuple[tuple[str, str], ...]]

_lock = threading.Lock()
_kept: OrderedDict[Key, Any] = OrderedDict()


@contextmanager
def kept_catalog(name: str, properties: Mapping[str, str]) -> Iterator[Any]:
    """The process's client for catalog ``name`` with ``properties`` (opened on first
    use); closed and forgotten when the body raises."""
    key: Key = (name, tuple(sorted((str(k), str(v)) for k, v in properties.items())))
    catalog = _get(key, properties)
    try:
        yield catalog
    except BaseException:
        _forget(key, catalog)
        raise


def _get(key: Key, properties: Mapping[str, str]) -> Any:
    from stream_sink.catalogs import load_catalog

    with _lock:
        catalog = _kept.get(key)
        if catalog is not None:
            _kept.move_to_end(key)
            return catalog
    args: dict[str, Any] = dict(properties)
    catalog = load_catalog(key[0], **args)
    evicted = []
    with _lock:
        present = _kept.get(key)
        if present is not None:  # another thread opened it meanwhile
            evicted.append(catalog)
            catalog = present
        else:
            _kept[key] = catalog
        while len(_kept) > MAX_KEPT:
            evicted.append(_kept.popitem(last=False)[1])
    for old in evicted:
        _close(old)
    return catalog


def _forget(key: Key, catalog: Any) -> None:
    with _lock:
        if _kept.get(key) is catalog:
            del _kept[key]
    _close(catalog)


def _close(catalog: Any) -> None:
    try:
        catalog.close()
    except Exception as e:  # a client we drop: nothing depends on its close
        log.debug("closing a catalog client: %s", e)


def clear() -> None:
    """Close and forget every kept client."""
    with _lock:
        kept = list(_kept.values())
        _kept.clear()
    for catalog in kept:
        _close(catalog)
