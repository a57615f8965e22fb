"""The run API answers only the stream's owner: another user's look, or cancel, is the 404 of a
run that does not exist, and changes nothing. Without credentials every run and approval route
is a 401 before anything is looked up, so that a real id is answered as an unknown one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import Gateway
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.testing import FakeGoose, Turn
from tests.support.flask_site import assert_error, flask_app
from tests.support.raw_requests import (
    JSON_TYPE,
    PREFIX,
    Call,
    assert_json_error,
    post_json,
    running_gateway,
)
from tests.support.waiting import until


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


ASK = {
    "type": "actionRequired",
    "data": {
        "actionType": "toolConfirmation",
        "id": "call_unseen",
        "toolName": "shell",
        "arguments": {"command": "ls"},
        "prompt": None,
    },
}
VISIBLE = {"userVisible": True, "agentVisible": True}
# (method, path template, which real id it names): every run and approval route.
ID_ROUTES = [
    ("GET", "/runs/{}", "run"),
    ("POST", "/runs/{}/cancel", "run"),
    ("GET", "/runs/{}/events", "run"),
    ("POST", "/approvals/{}/claim", "approval"),
    ("POST", "/approvals/{}/decision", "approval"),
    ("GET", "/streams/{}/approvals", "stream"),
    ("POST", "/streams/{}/runs", "stream"),
]
ANY_ID = st.one_of(
    st.uuids().map(str),
    st.text(alphabet="0123456789abcdef", min_size=32, max_size=32).map(lambda h: f"apr_{h}"),
    st.text(min_size=1, max_size=40),
    st.sampled_from(["conv", "no-such-run", "a\x00b", "..", "s" * 300]),
)


@contextlib.contextmanager
def run_and_approval(
    log_url: str,
) -> Iterator[tuple[asyncio.Runner, Gateway, dict[str, str]]]:
    """A strict gateway holding alice's run in "conv", waiting for her approval: the real
    ids, by kind."""
    with asyncio.Runner() as runner:
        fake = FakeGoose(ping_interval=0.05)
        asking = Turn().message({"role": "assistant", "content": [ASK], "metadata": VISIBLE})
        fake.script_next_session(asking.hang())
        gates = contextlib.AsyncExitStack()
        opened = running_gateway(log_url, fake, app=flask_app(None), allow_anonymous=False)
        gateway, log = runner.run(gates.enter_async_context(opened))
        try:
            token = ApiTokens(log).create("alice")[1]
            alice = [*JSON_TYPE, (b"authorization", f"Bearer {token}".encode())]
            start = post_json(f"{PREFIX}/streams/conv/runs", {"message": "go"}, headers=alice)
            started = runner.run(start(gateway))
            assert started.status == 200, started.body
            assert gateway.approvals is not None
            service = gateway.approvals
            runner.run(until(lambda: service.of_stream("conv"), 10))
            (approval,) = runner.run(service.of_stream("conv"))
            ids = {"run": started.json()["run_id"], "approval": approval.approval_id}
            yield runner, gateway, {**ids, "stream": "conv"}
        finally:
            fake.restart()  # its turn waits for an answer for ever: the fake stops waiting
            runner.run(gates.aclose())


def unauthenticated(method: str, template: str, some_id: str) -> Call:
    path = PREFIX + template.format(quote(some_id, safe=""))
    return Call(method, path.encode(), headers=JSON_TYPE, body=b'{"message": "hi"}')


def test_without_credentials_a_real_run_or_approval_is_answered_as_an_unknown_one(
    log_url: str,
) -> None:
    with run_and_approval(log_url) as (runner, gateway, real):

        @settings(max_examples=60, deadline=None)
        @given(route=st.sampled_from(ID_ROUTES), other=ANY_ID)
        def alike(route: tuple[str, str, str], other: str) -> None:
            method, template, kind = route
            known = runner.run(unauthenticated(method, template, real[kind])(gateway))
            unknown = runner.run(unauthenticated(method, template, other)(gateway))
            assert_json_error(known, 401, "unauthenticated")
            assert (unknown.status, unknown.headers, unknown.body) == (
                known.status,
                known.headers,
                known.body,
            ), (method, template, other)

        alike()
