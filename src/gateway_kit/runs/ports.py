"""What runs need from the upstream side, as protocols: runs never import the upstream adapter.

The upstream adapter (`gateway_kit.upstream`) builds on runs (its pumps read and end them), so
the dependency goes one way only; `GooseUpstream` and `PumpManager` fit these protocols.
"""

from __future__ import annotations

from typing import Any, Protocol


class UpstreamSession(Protocol):
    @property
    def id(self) -> str: ...


class Upstream(Protocol):
    async def start_session(
        self, working_dir: str, *, extension_overrides: list[dict[str, Any]] | None = None
    ) -> UpstreamSession: ...

    async def session_extensions(self, session_id: str) -> list[dict[str, Any]]: ...

    async def session_tools(self, session_id: str) -> list[dict[str, Any]]: ...

    async def reply(
        self,
        session_id: str,
        text: str,
        request_id: str,
        *,
        override_conversation: list[dict[str, Any]] | None = None,
    ) -> object: ...

    async def cancel(self, session_id: str, request_id: str) -> None: ...

    async def aclose(self) -> None:
        """Close the connections this upstream opened itself (at the lifespan's shutdown)."""


class Pumps(Protocol):
    def ensure(self, session_id: str) -> None:
        """Make sure the session's events are being copied into the log."""

    async def start(self) -> None:
        """Start looking for sessions nobody pumps (their process died)."""

    async def stop(self) -> None:
        """Stop every pump of this process."""
