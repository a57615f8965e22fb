"""One user may have `max_active_runs_per_user` runs active at once (8 by default), counted in
the database: one more start is a 429 with ``Retry-After`` that writes nothing and asks nothing
of goose, whichever process it reaches, and however many come at once."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import settings as settings_of
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from gateway_kit.runs.model import Run, RunStatus
from gateway_kit.runs.service import starter_of
from gateway_kit.runs.store import RunStore, TooManyActiveRuns
from gateway_kit.testing import FakeGoose, Turn
from tests.support.raw_requests import (
    JSON_TYPE,
    PREFIX,
    Call,
    assert_json_error,
    goose_calls,
    writes,
)
from tests.support.upstream import FAST, GOOSE_URL
from tests.support.waiting import until

BASE = "http://gateway.test"
STREAMS = st.one_of(st.sampled_from(["bob-0", "bob-1", "new"]), st.text(min_size=1, max_size=30))
BODIES = st.one_of(
    st.text(max_size=40).map(lambda text: json.dumps({"message": text}).encode()),
    st.sampled_from([b'{"message": "go"}', b"{}", b"[]", b"not json", b'{"message": 7}']),
    st.binary(max_size=40),
)


def working(_message: Any) -> Turn:
    return Turn().text("working").hang()


@asynccontextmanager
async def processes(
    log_url: str, fake: FakeGoose, count: int = 1, lifecycle: LifecycleSettings | None = None
) -> AsyncIterator[list[tuple[httpx.AsyncClient, Gateway]]]:
    """`count` strict gateways on one database, each with a log of its own, as processes
    have: a client of each."""
    goose_client = httpx.AsyncClient()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(goose_client.aclose)
        router = stack.enter_context(respx.mock(assert_all_called=False))
        fake.mock(router, base_url=GOOSE_URL)
        router.route(host="gateway.test").pass_through()
        served = []
        for _ in range(count):
            log = EventLog(log_url)
            stack.callback(log.close)
            upstream = GooseUpstream(
                base_url=GOOSE_URL, secret_key=fake.secret_key, client=goose_client
            )
            settings = GatewaySettings(pumps=FAST, lifecycle=lifecycle or LifecycleSettings())
            gateway = Gateway(
                log=log, upstream=upstream, settings=settings, load_entry_points=False
            )  # fmt: skip
            assert gateway.runs is not None
            stack.push_async_callback(gateway.runs.shutdown)
            transport = httpx.ASGITransport(app=gateway)
            client = await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url=BASE)
            )
            served.append((client, gateway))
        stack.callback(fake.restart)  # its turns never end by themselves
        yield served


def bearer(log: EventLog, user: str) -> dict[str, str]:
    return {"authorization": f"Bearer {ApiTokens(log).create(user)[1]}"}


async def start(client: httpx.AsyncClient, user: dict[str, str], stream: str) -> httpx.Response:
    return await client.post(
        f"/gateway/streams/{stream}/runs", json={"message": "go"}, headers=user
    )


def test_one_run_more_than_the_default_is_a_429_that_writes_nothing(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05, default_turn=working)
        async with processes(log_url, fake) as [(client, gateway)]:
            bob, alice = bearer(gateway.log, "bob"), bearer(gateway.log, "alice")
            started = [await start(client, bob, f"bob-{i}") for i in range(8)]
            assert [answer.status_code for answer in started] == [200] * 8
            before, asked = writes(gateway.log), goose_calls(fake)

            refused = await start(client, bob, "bob-8")
            assert refused.status_code == 429, refused.text
            assert refused.headers["content-type"] == "application/json"
            assert int(refused.headers["retry-after"]) > 0
            assert refused.json()["error"] == "too_many_runs"
            assert "8 active run(s)" in refused.json()["message"]
            assert writes(gateway.log) == before  # no run, no binding, no event
            assert goose_calls(fake) == asked  # no session started, nothing sent
            assert (await start(client, alice, "alice-0")).status_code == 200  # hers count apart

            first = started[0].json()["run_id"]
            cancelled = await client.post(f"/gateway/runs/{first}/cancel", headers=bob)
            assert cancelled.status_code == 200, cancelled.text

            async def ended() -> bool:
                shown = await client.get(f"/gateway/runs/{first}", headers=bob)
                return bool(shown.json()["status"] != "active")

            deadline = time.monotonic() + 20
            while not await ended():
                assert time.monotonic() < deadline, "the cancelled run never ended"
                await asyncio.sleep(0.02)
            assert (await start(client, bob, "bob-8")).status_code == 200  # room again

    asyncio.run(main())


def test_starts_at_once_through_two_processes_never_pass_the_limit(log_url: str) -> None:
    limit, tries = 3, 12
    settings = LifecycleSettings(max_active_runs_per_user=limit)

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05, default_turn=working)
        async with processes(log_url, fake, 2, lifecycle=settings) as served:
            bob = bearer(served[0][1].log, "bob")
            answers = await asyncio.gather(
                *(start(served[i % 2][0], bob, f"bob-{i}") for i in range(tries))
            )
            statuses = sorted(answer.status_code for answer in answers)
            assert statuses == [200] * limit + [429] * (tries - limit), statuses
            store = RunStore(served[0][1].log)
            assert store.active_count("bob") == limit

    asyncio.run(main())


def a_run(stream: str, user: str) -> Run:
    return Run(
        run_id=str(uuid.uuid4()),
        stream=stream,
        session_id=f"session-of-{stream}",
        upstream_request_id=str(uuid.uuid4()),
        status=RunStatus.ACTIVE,
        attempt=1,
        cancel_requested=False,
        message="go",
        created_at=time.time(),
        started_by=user,
    )


def test_runs_recorded_at_once_are_counted_under_one_lock_per_user(log_url: str) -> None:
    """The count in the transaction that records a run, with no look before it: of sixteen
    runs recorded at once through four logs (as four processes), exactly the limit go in."""
    limit, processes_count, per_process = 3, 4, 4
    logs = [EventLog(log_url) for _ in range(processes_count)]
    gate = threading.Barrier(processes_count * per_process)
    outcomes: list[str] = []

    def record(log: EventLog, n: int) -> None:
        gate.wait()
        try:
            RunStore(log).create(a_run(f"bob-{n}", "bob"), max_active=limit)
        except TooManyActiveRuns:
            outcomes.append("refused")
        else:
            outcomes.append("recorded")

    try:
        threads = [
            threading.Thread(target=record, args=(log, i * per_process + j))
            for i, log in enumerate(logs)
            for j in range(per_process)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["recorded"] * limit + ["refused"] * (len(threads) - limit)
        assert RunStore(logs[0]).active_count("bob") == limit
        RunStore(logs[0]).create(a_run("alice-0", "alice"), max_active=limit)  # hers apart
    finally:
        for log in logs:
            log.close()


def test_any_start_of_a_user_at_the_limit_is_refused_and_writes_nothing(log_url: str) -> None:
    settings = LifecycleSettings(max_active_runs_per_user=1)
    fake = FakeGoose(ping_interval=0.05, default_turn=working)
    with asyncio.Runner() as runner:
        gates = AsyncExitStack()
        served = runner.run(gates.enter_async_context(processes(log_url, fake, lifecycle=settings)))
        try:
            client, gateway = served[0]
            token = ApiTokens(gateway.log).create("bob")[1]
            bob = [*JSON_TYPE, (b"authorization", f"Bearer {token}".encode())]
            first = runner.run(start(client, {"authorization": f"Bearer {token}"}, "bob-0"))
            assert first.status_code == 200, first.text

            def working_said() -> bool:  # its run writes nothing more until it ends
                events = gateway.log.read(stream="bob-0", limit=100, settled=False)
                return any(event.type == "Message" for event in events)

            runner.run(until(working_said, 10))
            seen: set[int] = set()

            @settings_of(max_examples=60, deadline=None)
            @given(stream=STREAMS, body=BODIES)
            def refused(stream: str, body: bytes) -> None:
                before, asked = writes(gateway.log), goose_calls(fake)
                path = f"{PREFIX}/streams/{quote(stream, safe='')}/runs"
                answer = runner.run(Call("POST", path.encode(), headers=bob, body=body)(gateway))
                seen.add(answer.status)
                assert 400 <= answer.status < 500, (answer.status, answer.body[:300])
                assert_json_error(answer, answer.status)
                if answer.status == 429:
                    assert int(answer.header("retry-after") or "0") > 0, answer.headers
                assert writes(gateway.log) == before, "a refused start wrote"
                assert goose_calls(fake) == asked, "a refused start reached goose"

            refused()
            assert 429 in seen, seen
        finally:
            runner.run(gates.aclose())


def test_a_user_id_the_database_cannot_hold_is_counted_all_the_same(log: EventLog) -> None:
    store = RunStore(log)
    odd = starter_of("bob\x00")  # a plugin's principal may be named so; PostgreSQL holds no NUL
    store.create(a_run("odd-0", odd), max_active=1)
    with pytest.raises(TooManyActiveRuns):
        store.create(a_run("odd-1", odd), max_active=1)
    assert store.active_count(starter_of("bob\x00")) == 1
    assert store.active_count(starter_of("bob")) == 0
