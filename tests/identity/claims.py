"""What the ownership tests share: a strict gateway over the fake goose (whose replies may be
refused), users with API tokens, and the reads a user may try on a stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import respx
import sqlalchemy as sa

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream
from gateway_kit.identity.tables import STREAM_OWNERS
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.testing import FakeGoose
from tests.support.flask_site import flask_app
from tests.support.legacy_paths import EXAMPLE_LEGACY
from tests.support.raw_requests import JSON_TYPE, Answer, Call, get, goose_calls, writes
from tests.support.upstream import FAST, GOOSE_URL
from tests.support.waiting import until

USERS = ("alice", "bob", "carol")


@dataclass
class Site:
    gateway: Gateway
    log: EventLog
    fake: FakeGoose
    tokens: dict[str, str]  # user → an API token of theirs

    def auth(self, user: str) -> list[tuple[bytes, bytes]]:
        return [(b"authorization", f"Bearer {self.tokens[user]}".encode())]

    async def start(self, user: str, stream: str, message: str = "hi") -> Answer:
        body = json.dumps({"message": message}).encode()
        path = f"/gateway/streams/{stream}/runs".encode()
        return await Call("POST", path, headers=[*JSON_TYPE, *self.auth(user)], body=body)(
            self.gateway
        )

    async def reads(self, user: str, stream: str, run_id: str | None) -> dict[str, Answer]:
        """Every way `user` may try to read `stream` (and its run `run_id`)."""
        token = f"Bearer {self.tokens[user]}"
        calls = {
            "sse": get(f"/gateway/streams/{stream}/events", authorization=token),
            "page": get(
                f"/gateway/streams/{stream}/events", authorization=token, accept="application/json"
            ),
        }
        if run_id is not None:
            calls["run_sse"] = get(f"/gateway/runs/{run_id}/events", authorization=token)
            calls["legacy"] = get(f"/api/tasks/{run_id}", "from=0", authorization=token)
        return {name: await call(self.gateway) for name, call in calls.items()}

    async def settled(
        self, user: str, stream: str, run_id: str, wanted: list[str]
    ) -> dict[str, Answer]:
        """`user`'s reads of `stream` once its JSON page shows every text of `wanted` (on
        PostgreSQL a read serves only settled rows, which a commit may take a moment to be)."""
        answers: dict[str, Answer] = {}

        async def shown() -> bool:
            answers.update(await self.reads(user, stream, run_id))
            page = answers["page"]
            return page.status != 200 or all(text in page.body.decode() for text in wanted)

        await until(shown, failure=lambda: f"not shown: {answers['page'].body[:300]!r}")
        return answers

    def snapshot(self) -> tuple[Any, ...]:
        """Every row a run start may write, and what goose was asked."""
        with self.log.tables.engine.connect() as conn:
            owners = conn.execute(sa.text(f"SELECT * FROM {STREAM_OWNERS} ORDER BY stream"))
            owner_rows = tuple(tuple(row) for row in owners)
        return writes(self.log), owner_rows, goose_calls(self.fake)


def texts(answer: Answer) -> list[str]:
    """The texts an answer carries, whatever its shape."""
    body = answer.body.decode("utf-8", "replace")
    return [word for word in ("victim-secret-1", "victim-secret-2") if word in body]


@asynccontextmanager
async def site(
    log_url: str, *, reply_status: int | None = None, plugins: Sequence[object] = ()
) -> AsyncIterator[Site]:
    """A strict gateway (no anonymous access) over the fake goose, with `plugins`; with
    `reply_status`, goose answers every reply with that status instead."""
    log = EventLog(log_url)
    fake = FakeGoose(ping_interval=0.05)
    client = httpx.AsyncClient()
    try:
        with respx.mock(assert_all_called=False) as router:
            if reply_status is not None:
                router.post(url__regex=rf"^{GOOSE_URL}/sessions/[^/]+/reply$").mock(
                    return_value=httpx.Response(reply_status, json={"message": "goose is down"})
                )
            fake.mock(router, base_url=GOOSE_URL)
            upstream = GooseUpstream(base_url=GOOSE_URL, secret_key=fake.secret_key, client=client)
            gateway = Gateway(
                flask_app(None),
                log=log,
                upstream=upstream,
                settings=GatewaySettings(pumps=FAST),
                plugins=plugins,
                **EXAMPLE_LEGACY,
            )
            tokens = ApiTokens(log)
            made = {user: tokens.create(user)[1] for user in USERS}
            try:
                yield Site(gateway, log, fake, made)
            finally:
                assert gateway.pumps is not None
                await gateway.pumps.stop()
                await fake.wait_idle()
    finally:
        await client.aclose()
        log.close()
