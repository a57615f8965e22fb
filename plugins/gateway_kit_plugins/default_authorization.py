"""The default answer of `authorize_subscription`: a stream is read by its owner only.

A stream's owner is the one the wrapped app declared (`gateway_kit.identity.owners.StreamOwners`),
or the user who started the first run of a stream that held no event. A stream without an owner
is read by nobody, so that whoever writes to it first is never watched by someone who came
before (a warning names, once, each stream that holds events and no owner). The ``anonymous``
principal (only with ``Gateway(allow_anonymous=True)``) reads everything.

Every other plugin is asked first (``trylast``): a deployment's plugin shares conversations or
lets admins in by answering ``True``. A run's starter that is about to take a stream with neither
events nor an owner (``action="claim"``) is answered as its owner-to-be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway_kit import Principal, hookimpl
from gateway_kit.hooks import PluginContext
from gateway_kit.hooks.hookspecs import CLAIM
from gateway_kit.identity.owners import UNOWNED_WRITES, StreamOwners


class DefaultAuthorization:
    def __init__(self) -> None:
        self.owners: StreamOwners | None = None

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        if context.log is not None:
            self.owners = StreamOwners(context.log)

    @hookimpl(trylast=True)
    def authorize_subscription(self, principal: Principal, stream: str, action: str) -> bool:
        if principal.anonymous:
            return True
        if self.owners is None:
            return False
        owner = self.owners.owner(stream)
        if owner is None:
            if action == CLAIM:
                return True  # the starter of a new stream's first run: its owner-to-be
            UNOWNED_WRITES.check(self.owners, stream, writing=False)  # why nobody reads it
        return owner == principal.user_id
