"""Which ``domainMetadata`` actions a commit of this package may write (PROTOCOL.md
"Domain Metadata").

Invariants: a commit carries domain metadata only when the table's protocol lists the
``domainMetadata`` writer feature; it writes user-controlled domains only (never one
named ``delta.*``, which the protocol reserves for system domains a writer must
understand); and at most one action per domain. Two commits writing the same domain
conflict (:mod:`.conflicts`).
"""

from __future__ import annotations

from collections.abc import Iterable

from stream_sink.exceptions import UnsupportedError, ValidationError

from .actions import Action, DomainMetadata, Protocol
from .features import DOMAIN_METADATA, writer_features

SYSTEM_PREFIX = "delta."


def written_domains(actions: Iterable[Action]) -> frozenset[str]:
    """The domains ``actions`` write (or remove)."""
    return frozenset(a.domain for a in actions if isinstance(a, DomainMetadata))


def check_domain_actions(actions: Iterable[Action], protocol: Protocol, where: str) -> None:
    """Refuse domain metadata the protocol does not allow: without the writer feature
    (UnsupportedError), a ``delta.`` system domain or two actions for one domain
    (ValidationError)."""
    domains = [a.domain for a in actions if isinstance(a, DomainMetadata)]
    if not domains:
        return
    if DOMAIN_METADATA not in writer_features(protocol):
        raise UnsupportedError(
            f"{where}: the table's protocol does not list the {DOMAIN_METADATA} writer "
            f"feature, so no domain metadata ({sorted(set(domains))}) may be written; set "
            f"the table property 'delta.feature.{DOMAIN_METADATA}' = 'supported' first"
        )
    system = sorted(d for d in domains if d.startswith(SYSTEM_PREFIX))
    if system:
        raise ValidationError(
            f"{where}: domains {system} are system domains (the {SYSTEM_PREFIX!r} prefix is "
            "reserved for Delta itself); stream_sink writes user-controlled domains only"
        )
    twice = sorted({d for d in domains if domains.count(d) > 1})
    if twice:
        raise ValidationError(f"{where}: domains {twice} appear more than once in one commit")
