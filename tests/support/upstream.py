"""A gateway's upstream side wired to the fake goose through respx, on a real log."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import respx

from gateway_kit import Event, EventLog, GatewaySettings
from gateway_kit.hooks import Plugins
from gateway_kit.runs.lifecycle import RunLifecycle
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from gateway_kit.runs.model import Run
from gateway_kit.runs.service import RunService
from gateway_kit.runs.store import RunStore
from gateway_kit.testing import FakeGoose
from gateway_kit.upstream import GooseUpstream
from gateway_kit.upstream.goose.pump import PumpSettings
from gateway_kit.upstream.goose.pumps import PumpManager
from tests.support.waiting import until

GOOSE_URL = "http://goose.test"
STREAM = "conv-1"
FAST = PumpSettings(
    lost_run_grace=0.6,
    error_finish_grace=0.3,
    reconnect_delay=0.02,
    max_reconnect_delay=0.1,
    upstream_down_timeout=2.0,
    lease_ttl=3.0,
)


def fast_pumps(settings: GatewaySettings | None = None) -> GatewaySettings:
    """`settings` (the defaults when None) with the pumps' timings `FAST`, unless it gives its
    own."""
    settings = settings or GatewaySettings()
    if settings.pumps != PumpSettings():
        return settings
    return dataclasses.replace(settings, pumps=FAST)


@dataclass
class Harness:
    log: EventLog
    store: RunStore
    fake: FakeGoose
    upstream: GooseUpstream
    pumps: PumpManager
    runs: RunService
    session_id: str

    plugins: Plugins

    def new_pumps(self) -> PumpManager:
        """Another gateway process's pumps and lifecycle (same database, same goose)."""
        pumps = PumpManager(
            log=self.log,
            store=self.store,
            upstream=self.upstream,
            settings=FAST,
            lifecycle=RunLifecycle(
                log=self.log, store=self.store, upstream=self.upstream, plugins=self.plugins
            ),
        )
        self.runs.pumps = pumps
        self.runs.lifecycle = pumps.lifecycle
        return pumps

    async def take_over(self) -> PumpManager:
        """This process dies; another one's pumps take the session over and connect to goose."""
        await self.runs.pumps.stop()
        calls = len(self.fake.events_calls)
        pumps = self.new_pumps()
        pumps.ensure(self.session_id)
        await self.until(lambda: len(self.fake.events_calls) > calls)
        return pumps

    def events(self, run: Run | None = None) -> list[Event]:
        if run is None:
            return self.log.read(stream=STREAM, limit=10_000)
        return self.log.read(run_id=run.run_id, limit=10_000)

    def sent_headers(self) -> list[str | None]:
        return [call.last_event_id for call in self.fake.events_calls]

    async def until(self, condition: Callable[[], object], timeout: float = 10.0) -> None:
        await until(condition, timeout)

    async def finished(self, run: Run, timeout: float = 10.0) -> Run:
        """Wait until the run has ended and readers of the log see its end (on PostgreSQL they
        keep to settled rows, which may lag the run's row while older transactions run)."""

        def ended() -> bool:
            current = self.store.get(run.run_id)
            if current is None or current.active:
                return False
            end = self.log.run_end(run.run_id)
            return end is None or self.log.read(after=end.seq - 1, limit=1) == [end]

        await self.until(ended, timeout)
        current = self.store.get(run.run_id)
        assert current is not None
        return current


@contextlib.asynccontextmanager
async def harness(
    log_url: str,
    *,
    plugins: Sequence[object] = (),
    goose: type[FakeGoose] = FakeGoose,
    settings: PumpSettings = FAST,
    lifecycle_settings: LifecycleSettings | None = None,
    **fake_options: Any,
) -> AsyncIterator[Harness]:
    """`goose`: the fake's class (a hostile one); `settings`: the pumps' timings."""
    fake = goose(ping_interval=0.05, **fake_options)
    log = EventLog(log_url)
    store = RunStore(log)
    client = httpx.AsyncClient()
    hooks = Plugins(plugins, load_entry_points=False)
    try:
        with respx.mock(assert_all_called=False) as router:
            fake.mock(router, base_url=GOOSE_URL)
            upstream = GooseUpstream(base_url=GOOSE_URL, secret_key=fake.secret_key, client=client)
            lifecycle = RunLifecycle(
                log=log, store=store, upstream=upstream, plugins=hooks, settings=lifecycle_settings
            )
            pumps = PumpManager(
                log=log, store=store, upstream=upstream, settings=settings, lifecycle=lifecycle
            )
            runs = RunService(
                log=log, store=store, upstream=upstream, pumps=pumps, lifecycle=lifecycle
            )
            session_id = fake.create_session()
            store.bind(STREAM, session_id)
            h = Harness(log, store, fake, upstream, pumps, runs, session_id, hooks)
            try:
                yield h
            finally:
                await h.pumps.stop()
                await pumps.stop()
                await h.runs.lifecycle.stop()
                await lifecycle.stop()
    finally:
        await client.aclose()
        log.close()


def goose_ids(events: list[Event]) -> list[int]:
    return [int(e.upstream_event_id) for e in events if e.upstream_event_id is not None]


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]
