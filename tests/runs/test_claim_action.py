"""`authorize_subscription` is told what the principal is about to do: ``"claim"`` when a run's
starter takes a stream nobody owns, ``"read"`` otherwise; a plugin can refuse claims alone."""

from __future__ import annotations

import asyncio

from gateway_kit import Principal
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.testing import FakeGoose
from gateway_kit.types import Scope
from tests.support.plugins import plugin
from tests.support.runs import gateway_client, wait_status

ANN = {"x-user": "ann"}


def by_header(scope: Scope) -> Principal | None:
    for key, value in scope["headers"]:
        if key == b"x-user":
            return Principal(value.decode(), "header", credential_id="test")
    return None


def test_a_claiming_start_is_asked_as_a_claim_and_the_runs_reads_as_reads(log_url: str) -> None:
    asked: list[tuple[str, str, str]] = []

    def record(principal: Principal, stream: str, action: str) -> None:
        asked.append((principal.user_id, stream, action))

    async def main() -> None:
        plugins = [
            plugin("sso", resolve_principal=by_header),
            plugin("audit", authorize_subscription=record),
        ]
        async with gateway_client(log_url, FakeGoose(ping_interval=0.05), plugins=plugins) as (
            client,
            _,
            log,
        ):
            started = await client.post(
                "/gateway/streams/fresh/runs", json={"message": "hi"}, headers=ANN
            )
            assert started.status_code == 200, started.text
            assert asked == [("ann", "fresh", "claim")]
            assert StreamOwners(log).owner("fresh") == "ann"
            run_id = started.json()["run_id"]
            shown = await client.get(f"/gateway/runs/{run_id}", headers=ANN)
            assert shown.status_code == 200
            assert asked[1:] == [("ann", "fresh", "read")]
            await wait_status(client, run_id, "finished")
            asked.clear()
            again = await client.post(
                "/gateway/streams/fresh/runs", json={"message": "more"}, headers=ANN
            )
            assert again.status_code == 200, again.text
            assert asked == [("ann", "fresh", "read")]  # hers now: nothing left to claim

    asyncio.run(main())


def test_a_plugin_refusing_claims_stops_the_start_and_leaves_reads_alone(log_url: str) -> None:
    def no_claims(stream: str, action: str) -> bool | None:
        return False if action == "claim" else None

    async def main() -> None:
        plugins = [
            plugin("sso", resolve_principal=by_header),
            plugin("no-claims", authorize_subscription=no_claims),
        ]
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=plugins) as (client, _, log):
            refused = await client.post(
                "/gateway/streams/fresh/runs", json={"message": "hi"}, headers=ANN
            )
            assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
            assert StreamOwners(log).owner("fresh") is None
            assert log.read(stream="fresh") == [] and fake.reply_calls == []
            StreamOwners(log).declare("fresh", "ann")  # declared by the app: a read from here on
            started = await client.post(
                "/gateway/streams/fresh/runs", json={"message": "hi"}, headers=ANN
            )
            assert started.status_code == 200, started.text

    asyncio.run(main())
