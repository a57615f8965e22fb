"""Runs over HTTP: start, conflict, cancel, state, and resuming a run's events by cursor."""

from __future__ import annotations

import asyncio

from gateway_kit import GatewaySettings, LifecycleSettings
from gateway_kit.testing import FakeGoose, Turn
from tests.support.runs import bound_session, gateway_client, sse_events, start_run, wait_status
from tests.support.upstream import until


def test_start_a_run_and_read_its_events(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, _, _):
            answer = await client.post("/gateway/streams/conv/runs", json={"message": "hi you"})
            assert answer.status_code == 200
            run_id = answer.json()["run_id"]
            assert answer.json()["status"] == "active"
            await wait_status(client, run_id, "finished")
            events = await client.get(f"/gateway/runs/{run_id}/events")
            received = [e["type"] for e in sse_events(events.text)]
            assert (received[0], received[-1]) == ("RunStarted", "Finish")
            assert fake.reply_calls[0].user_message["content"][0]["text"] == "hi you"

    asyncio.run(main())


def test_a_second_run_while_one_is_active_is_a_409(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, _):
            release = asyncio.Event()
            bound_session(fake, gateway, Turn().text("x").pause(release), Turn().text("y"))
            first = await start_run(client, "one")
            second = await client.post("/gateway/streams/conv/runs", json={"message": "two"})
            assert (second.status_code, second.json()["error"]) == (409, "run_active")
            assert len(fake.reply_calls) == 1  # goose never saw the refused run
            await start_run(client, "ok", stream="other")  # other conversations not held up
            release.set()
            await wait_status(client, first, "finished")
            third = await start_run(client, "three")
            await wait_status(client, third, "finished")

    asyncio.run(main())


def test_cancel_ends_the_run_when_goose_finishes_it(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, log):
            bound_session(fake, gateway, Turn().text("working").hang())
            run_id = await start_run(client, "long job")
            busy = await client.post("/gateway/streams/conv/runs", json={"message": "more"})
            assert busy.status_code == 409
            cancelled = await client.post(f"/gateway/runs/{run_id}/cancel")
            assert cancelled.status_code == 200
            assert cancelled.json()["cancel_requested"] is True
            await wait_status(client, run_id, "cancelled")
            shown = (await client.get(f"/gateway/runs/{run_id}")).json()
            assert fake.cancel_calls[0].request_id == shown["attempts"][0]["upstream_request_id"]
            types = [e.type for e in log.read(run_id=run_id)]
            assert types[0] == "RunStarted" and "CancelRequested" in types
            assert types[-1] == "Finish"

    asyncio.run(main())


def test_a_phone_resuming_with_only_its_gateway_cursor_gets_finish(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, log):
            release = asyncio.Event()
            bound_session(fake, gateway, Turn().text("first").pause(release).text("second"))
            run_id = await start_run(client, "go")

            def messages() -> list[int]:
                return [e.seq for e in log.read(run_id=run_id) if e.type == "Message"]

            await until(messages)  # the phone saw events up to the first chunk, then locked
            cursor = messages()[-1]
            release.set()
            await wait_status(client, run_id, "finished")
            resumed = await client.get(
                f"/gateway/runs/{run_id}/events", headers={"Last-Event-ID": str(cursor)}
            )
            types = [e["type"] for e in sse_events(resumed.text)]
            assert types == ["Message", "UpstreamFinish", "Finish"]
            again = await client.get(
                f"/gateway/runs/{run_id}/events",
                headers={"Last-Event-ID": str(log.read(run_id=run_id)[-1].seq)},
            )
            assert again.status_code == 204  # EventSource stops instead of looping

    asyncio.run(main())


def test_bad_requests_get_json_errors(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, _, _):
            json_type = {"content-type": "application/json"}
            for body in (b"not json", b"[]", b'{"message": ""}', b'{"message": 3}'):
                answer = await client.post(
                    "/gateway/streams/conv/runs", content=body, headers=json_type
                )
                assert answer.status_code == 400
                assert answer.json()["error"] == "invalid_body"
            untyped = await client.post("/gateway/streams/conv/runs", content=b'{"message": "x"}')
            assert (untyped.status_code, untyped.json()["error"]) == (415, "unsupported_media_type")
            missing = await client.post("/gateway/runs/nope/cancel")
            assert (missing.status_code, missing.json()["error"]) == (404, "run_not_found")
            wrong = await client.get("/gateway/streams/conv/runs")
            assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
        async with gateway_client(log_url, fake, with_upstream=False) as (client, _, _):
            answer = await client.post("/gateway/streams/conv/runs", json={"message": "hi"})
            assert (answer.status_code, answer.json()["error"]) == (501, "no_upstream")

    asyncio.run(main())


def test_goose_refusing_the_run_fails_it_visibly(log_url: str) -> None:
    # goose stays busy with a request of someone else's: the start is refused once it has
    # tried for busy_wait.
    settings = LifecycleSettings(busy_wait=0.2)

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, settings=GatewaySettings(lifecycle=settings)) as (
            client,
            gateway,
            log,
        ):
            session_id = bound_session(fake, gateway, Turn().hang())
            await gateway.upstream.reply(session_id, "someone else's request")  # type: ignore[union-attr]
            answer = await client.post("/gateway/streams/conv/runs", json={"message": "mine"})
            assert (answer.status_code, answer.json()["error"]) == (409, "run_active")
            # What was written, settled or not: the 409 came after its commit.
            [run_id] = {e.run_id for e in log.read(stream="conv", settled=False)}
            assert [e.type for e in log.read(run_id=run_id, settled=False)] == [
                "RunStarted",
                "Error",
            ]
            retry_after_cancel = await client.post(f"/gateway/runs/{run_id}/cancel")
            assert retry_after_cancel.json()["status"] == "failed"

    asyncio.run(main())


def test_cancelling_an_ended_run_answers_what_get_answers(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, _):
            bound_session(fake, gateway, Turn().text("working").hang(), Turn().text("done"))
            cancelled = await start_run(client, "long job")
            assert (await client.post(f"/gateway/runs/{cancelled}/cancel")).status_code == 200
            await wait_status(client, cancelled, "cancelled")
            finished = await start_run(client, "short job")
            await wait_status(client, finished, "finished")
            for run_id in (cancelled, finished):
                again = await client.post(f"/gateway/runs/{run_id}/cancel")
                shown = await client.get(f"/gateway/runs/{run_id}")
                assert again.status_code == 200
                assert again.json() == shown.json()
                assert again.json()["attempts"] and again.json()["terminal_seq"] is not None

    asyncio.run(main())
