"""Principals from host-login tokens (method ``host``), for a CLI or desktop client on the
gateway's own machine.

A host-login token (``gateway-kit tokens create USER --host``, sent as ``Authorization: Bearer
gkh_...``) is accepted only from a loopback peer that sent no forwarding header and named a
local ``Host``: through a proxy, even one on the same machine, the real client is someone else.
"""

from __future__ import annotations

import ipaddress

from gateway_kit.http.request import header
from gateway_kit.identity.tokens import TokenKind
from gateway_kit.principal import HOST_METHOD
from gateway_kit.types import Scope

from .bearer_identity import BearerIdentity

# Headers by which a proxy says whom it forwards for: any of them, or of their families
# (X-Forwarded-Proto, X-Forwarded-Port, X-Real-IP-Chain...), means the peer is a proxy.
FORWARDING_HEADERS = frozenset(
    {
        b"forwarded",
        b"via",
        b"x-client-ip",
        b"true-client-ip",
        b"cf-connecting-ip",
        b"fastly-client-ip",
        b"x-cluster-client-ip",
    }
)
FORWARDING_PREFIXES = (b"forwarded-", b"x-forwarded", b"x-real-ip", b"x-original-forwarded")
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain"})


def loopback(address: object) -> bool:
    if not isinstance(address, str):
        return False
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def local_host_header(value: str | None) -> bool:
    """Whether a ``Host`` header names this machine: localhost or a loopback address, with
    or without a port."""
    if not value:
        return False
    host = value.strip().lower()
    if host.startswith("["):  # [::1]:8000
        host = host[1 : host.find("]")] if "]" in host else ""
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return host in LOCAL_NAMES or loopback(host)


def from_this_host(scope: Scope) -> bool:
    client = scope.get("client")
    if not client or not loopback(client[0]):
        return False
    for name, _value in scope.get("headers", ()):
        name = bytes(name).lower()
        if name in FORWARDING_HEADERS or name.startswith(FORWARDING_PREFIXES):
            return False
    return local_host_header(header(scope, b"host"))


class HostLoginIdentity(BearerIdentity):
    KIND = TokenKind.HOST
    METHOD = HOST_METHOD

    def admits(self, scope: Scope) -> bool:
        return from_this_host(scope)
