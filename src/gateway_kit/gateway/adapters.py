"""Which upstream adapter serves the upstream a gateway is given: one line per adapter.

A third adapter is a folder of `gateway_kit.upstream` with a factory fitting
`gateway_kit.upstream.adapter.UpstreamAdapter`, and its line in `ADAPTERS` (and `AnyUpstream`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..exceptions import SettingsError
from ..upstream.acp import AcpUpstream
from ..upstream.acp.adapter import AcpAdapter
from ..upstream.adapter import UpstreamAdapter
from ..upstream.goose import GooseUpstream
from ..upstream.goose.adapter import GooseAdapter

AnyUpstream = GooseUpstream | AcpUpstream

# The upstream's class → its adapter's factory.
ADAPTERS: dict[type[Any], Callable[[Any], UpstreamAdapter]] = {
    GooseUpstream: GooseAdapter,
    AcpUpstream: AcpAdapter,
}

UNKNOWN_UPSTREAM = "Gateway(upstream=...) must be one of {kinds}, got {value!r}"


def adapter_of(upstream: object) -> UpstreamAdapter:
    for kind, factory in ADAPTERS.items():
        if isinstance(upstream, kind):
            return factory(upstream)
    kinds = ", ".join(kind.__name__ for kind in ADAPTERS)
    raise SettingsError(UNKNOWN_UPSTREAM.format(kinds=kinds, value=upstream))
