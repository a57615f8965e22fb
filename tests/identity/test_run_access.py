"""The run API answers only the stream's owner: another user's look, or cancel, is the 404 of a
run that does not exist, and changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.testing import FakeGoose, Turn

from ..http import running_gateway
from .helpers import assert_error, flask_app


def test_another_user_can_neither_see_nor_cancel_a_run(log_url: str) -> None:
    fake = FakeGoose(default_turn=lambda _message: Turn().text("thinking").hang())

    async def main() -> None:
        async with running_gateway(log_url, fake, app=flask_app(None), allow_anonymous=False) as (
            gateway,
            log,
        ):
            tokens = ApiTokens(log)
            alice = {"authorization": f"Bearer {tokens.create('alice')[1]}"}
            bob = {"authorization": f"Bearer {tokens.create('bob')[1]}"}
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as c:
                started = await c.post(
                    "/gateway/streams/alice-conv/runs", json={"message": "hi"}, headers=alice
                )
                assert started.status_code in (200, 201, 202), started.text
                run: dict[str, Any] = started.json()
                path = f"/gateway/runs/{run['run_id']}"
                nowhere = "/gateway/runs/no-such-run"
                for method, tail in (("GET", ""), ("POST", "/cancel"), ("GET", "/events")):
                    theirs = await c.request(method, f"{path}{tail}", headers=bob)
                    missing = await c.request(method, f"{nowhere}{tail}", headers=bob)
                    assert_error(theirs, 404, "run_not_found")
                    # Alike but for the id each names: nothing tells that alice's run exists.
                    assert theirs.text.replace(run["run_id"], "ID") == missing.text.replace(
                        "no-such-run", "ID"
                    )
                assert (await c.get(path, headers=alice)).json()["cancel_requested"] is False
                cancelled = await c.post(f"{path}/cancel", headers=alice)
                assert cancelled.status_code == 200, cancelled.text
                assert cancelled.json()["cancel_requested"] is True

    asyncio.run(main())
