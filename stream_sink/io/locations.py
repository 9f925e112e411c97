"""File locations compared as Iceberg Java's ``DeleteOrphanFiles`` compares them: by
scheme, authority and path, with the spellings that name one file made equal.

Invariants:
- ``s3a://`` and ``s3n://`` are ``s3://`` (Java's default ``equalSchemes``); a path
  without a scheme, ``file:/x`` and ``file:///x`` are one local file; repeated slashes
  in a path are one, and a trailing slash is none (as Hadoop's ``Path`` normalises).
- A listed file matches a file the metadata names when the paths are equal and the
  metadata's scheme and authority are empty or equal (case-insensitive) to the
  listed ones. Equal paths with a scheme or authority that differ are a *conflict*:
  the metadata may name the listed file in a spelling not known to be equal, so
  whether it is an orphan cannot be told (Java's ``PrefixMismatchMode.ERROR``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

EQUAL_SCHEMES = {"s3a": "s3", "s3n": "s3"}
_SLASHES = re.compile(r"/{2,}")


@dataclass(frozen=True)
class FileUri:
    """A location's scheme and authority (lower case, ``""`` when absent) and path."""

    scheme: str
    authority: str
    path: str


def file_uri(location: str) -> FileUri:
    """``location`` as scheme, authority and normalised path (see the module)."""
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if not scheme or (len(scheme) == 1 and location[1:2] == ":"):  # a plain (or drive) path
        return FileUri("file", "", _path(location))
    scheme = EQUAL_SCHEMES.get(scheme, scheme)
    return FileUri(scheme, parts.netloc.lower(), _path(parts.path))


def _path(path: str) -> str:
    path = _SLASHES.sub("/", path)
    return path.rstrip("/") or "/"


def is_under(location: str, root: str) -> bool:
    """Whether ``location`` is ``root`` or lies below it (spellings made equal)."""
    loc, base = file_uri(location), file_uri(root)
    if (loc.scheme, loc.authority) != (base.scheme, base.authority):
        return False
    return loc.path == base.path or loc.path.startswith(base.path.rstrip("/") + "/")


class KnownFiles:
    """Locations the metadata names, looked up by listed locations."""

    def __init__(self, locations: Iterable[str]) -> None:
        self._by_path: dict[str, set[tuple[str, str]]] = {}
        for location in locations:
            uri = file_uri(location)
            self._by_path.setdefault(uri.path, set()).add((uri.scheme, uri.authority))

    def match(self, location: str) -> bool | None:
        """True: a known file; False: none has its path; None: a conflict (a known file
        has its path, but in another scheme or authority)."""
        uri = file_uri(location)
        known = self._by_path.get(uri.path)
        if known is None:
            return False
        for scheme, authority in known:
            if _component(scheme, uri.scheme) and _component(authority, uri.authority):
                return True
        return None

    def has_path(self, location: str) -> bool:
        """Whether a known file has ``location``'s path, in whatever scheme."""
        return file_uri(location).path in self._by_path

    def spellings(self, location: str) -> list[str]:
        """How the known files with ``location``'s path spell scheme and authority."""
        known = self._by_path.get(file_uri(location).path, set())
        return sorted(f"{s}://{a}" for s, a in known)


def _component(known: str, listed: str) -> bool:
    return not known or known == listed
