"""A gateway over the fake goose served to an httpx client in the test's event loop, and the
runs a test starts, waits for and reads through it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import respx

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream, LegacySurfaces
from gateway_kit.testing import FakeGoose, Turn
from tests.support.upstream import GOOSE_URL, fast_pumps
from tests.support.waiting import until

TASK_POLL = LegacySurfaces(tasks="/api/tasks")


@asynccontextmanager
async def gateway_client(
    log_url: str,
    fake: FakeGoose,
    *,
    with_upstream: bool = True,
    settings: GatewaySettings | None = None,
    **options: Any,
) -> AsyncIterator[tuple[httpx.AsyncClient, Gateway, EventLog]]:
    """A client of a `Gateway` on `log_url` whose goose is `fake`; `options` go to `Gateway`."""
    log = EventLog(log_url)
    goose_client = httpx.AsyncClient()
    try:
        with respx.mock(assert_all_called=False) as router:
            fake.mock(router, base_url=GOOSE_URL)
            router.route(host="gateway.test").pass_through()
            upstream = GooseUpstream(
                base_url=GOOSE_URL, secret_key=fake.secret_key, client=goose_client
            )
            gateway = Gateway(
                log=log,
                upstream=upstream if with_upstream else None,
                allow_anonymous=True,
                settings=fast_pumps(settings),
                **{"load_entry_points": False, "legacy": TASK_POLL, **options},
            )
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://gateway.test"
            ) as client:
                try:
                    yield client, gateway, log
                finally:
                    if gateway.runs is not None:
                        await gateway.runs.shutdown()
    finally:
        await goose_client.aclose()
        log.close()


def bound_session(fake: FakeGoose, gateway: Gateway, *turns: Turn) -> str:
    """A goose session for stream "conv", with the turns its next replies play."""
    session_id = fake.create_session()
    assert gateway.pumps is not None
    gateway.pumps.store.bind("conv", session_id)
    fake.script(session_id, *turns)
    return session_id


async def run_end(client: httpx.AsyncClient, run: dict[str, Any]) -> Any:
    """The terminal event of a run that has ended, as readers see it ([] while it is not
    settled; None before the run ends)."""
    if run.get("terminal_seq") is None:
        return None
    page = await client.get(
        f"/gateway/streams/{run['stream']}/events",
        params={"after": str(run["terminal_seq"] - 1), "limit": "1"},
        headers={"Accept": "application/json"},
    )
    return page.json()["events"]


async def wait_status(client: httpx.AsyncClient, run_id: str, status: str) -> dict[str, Any]:
    """Wait until the run has `status` and, once it has ended, until readers see its end.

    On PostgreSQL readers keep to settled rows: the run's end may be in its row a moment before
    a client can read its terminal event, while older transactions are still running.
    """
    body: dict[str, Any] = {}

    async def reached() -> bool:
        nonlocal body
        body = (await client.get(f"/gateway/runs/{run_id}")).json()
        if body["status"] != status:
            return False
        if status == "active":
            return True
        return [e["seq"] for e in await run_end(client, body) or []] == [body["terminal_seq"]]

    try:
        await until(reached, 20)
    except AssertionError:
        end = await run_end(client, body)
        raise AssertionError(
            f"run {run_id} never became {status}: {body}; its end: {end}"
        ) from None
    return body


async def start_run(client: httpx.AsyncClient, message: str, stream: str = "conv") -> str:
    answer = await client.post(f"/gateway/streams/{stream}/runs", json={"message": message})
    assert answer.status_code == 200, answer.text
    run_id: str = answer.json()["run_id"]
    return run_id


def sse_events(text: str) -> list[dict[str, object]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def run_types(events: list[Any]) -> list[str]:
    return [e["type"] if isinstance(e, dict) else e.type for e in events]


def terminal_count(types: list[str]) -> int:
    """How many envelopes a client that stops at the first Finish/Error would take as the end."""
    return sum(1 for t in types if t in ("Finish", "Error"))


def cancel_of(fake: FakeGoose, request_id: str) -> Any:
    return next(
        r for r in fake.requests if r.path.endswith("/cancel") and request_id.encode() in r.body
    )


def reply_of(fake: FakeGoose, request_id: str) -> Any:
    return next(
        r for r in fake.requests if r.path.endswith("/reply") and request_id.encode() in r.body
    )
