"""One gateway test over either upstream adapter: the fake goose (goosed over HTTP, mocked) or
the fake ACP agent (a real child process over stdio). A test says what the agent does in the
next run of a stream; the driver scripts it the way its agent is scripted."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from gateway_kit import AcpUpstream, EventLog, Gateway, GatewaySettings
from gateway_kit.testing import FakeGoose, Turn
from gateway_kit.testing.fake_acp_agent import MODULE, AcpScript
from tests.support.runs import TASK_POLL, gateway_client
from tests.support.upstream import fast_pumps

ADAPTERS = ["goose", "acp"]


@dataclass
class Driver:
    """What a test needs of the agent behind the gateway."""

    kind: str
    client: httpx.AsyncClient
    gateway: Gateway
    log: EventLog
    fake: FakeGoose | None = None
    releases: list[asyncio.Event] = field(default_factory=list)

    def says(self, *chunks: str) -> str:
        """The message of a run whose agent answers `chunks` and finishes."""
        if self.fake is not None:
            self.fake.script_next_session(Turn().text(*chunks))  # the stream's first run only
            return "say it"
        return AcpScript().text(*chunks).prompt()

    def hangs(self) -> str:
        """The message of a run whose agent writes a little, then waits for a cancel."""
        if self.fake is not None:
            self.fake.script_next_session(Turn().text("working").hang())
            return "long job"
        return AcpScript().text("working").hang().prompt()


@asynccontextmanager
async def gateway_over(
    kind: str, log_url: str, tmp_path: Path, *, mode: str | None = None, **options: Any
) -> AsyncIterator[Driver]:
    """A gateway over the `kind` adapter; `mode` is the ACP agent's session mode (the fake
    asks permission only in ``approve``), `options` go to `Gateway`."""
    if kind == "goose":
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, **options) as (client, gateway, log):
            yield Driver(kind, client, gateway, log, fake)
        return
    command = [sys.executable, "-m", MODULE, "--state-dir", str(tmp_path / "acp-sessions")]
    upstream = AcpUpstream(
        command=command,
        mode=mode,
        cancel_deadline=1.0,
        restart_delay=0.05,
        max_restart_delay=0.4,
    )
    log = EventLog(log_url)
    settings: GatewaySettings | None = options.pop("settings", None)
    gateway = Gateway(
        log=log,
        upstream=upstream,
        allow_anonymous=True,
        settings=fast_pumps(settings),
        **{"load_entry_points": False, "legacy": TASK_POLL, **options},
    )
    transport = httpx.ASGITransport(app=gateway)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
            try:
                yield Driver(kind, client, gateway, log)
            finally:
                if gateway.runs is not None:
                    await gateway.runs.shutdown()
    finally:
        log.close()
