"""Access plugins that hang take no request down with them.

Every request is answered within about the plugin timeout, however many calls hang, because a
call is timed from when it is asked for, not from when a thread takes it. What it gets says
who decided:

- the plugin was asked and did not answer in time: refused (401 for identity, 403 for a read),
  logged with its name, as for any plugin that fails;
- the gateway could not ask it (no thread was free before the timeout, or the plugin has
  `plugin_hung_limit` calls hung): 503 ``plugin_unavailable`` with ``Retry-After``, never a
  refusal, so a client retries instead of logging out.

Identity and authorization have threads of their own: one hanging never holds up the other.
The plugins here block on an event that is set only when the test ends; the deadlines are
generous multiples of the plugin timeout, a check that every request is answered, not a
measure of how fast.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from flask import Flask

from gateway_kit import EventLog, Gateway, GatewaySettings, PluginSettings, Principal, hookimpl
from gateway_kit.hooks import manager
from gateway_kit.http.errors import PLUGIN_UNAVAILABLE
from gateway_kit.identity.owners import StreamOwners
from tests.support.waiting import until

TIMEOUT = 0.5  # the plugin timeout of these gateways
DEADLINE = 8 * TIMEOUT  # every request of a burst is answered by then
BURST = 160  # concurrent requests: many times the threads a kind of hook has
NEVER_CAPPED = 10_000  # a hung limit no burst here reaches
JSON = {"accept": "application/json"}
ALICE = {"x-user": "alice", **JSON}
LOGIN_PAGE = "the login page"


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        event_log.append("mine", "Message", {"text": "hi"}, run_id="run-mine")
        StreamOwners(event_log).declare("mine", "alice")
        yield event_log


def login_app() -> Flask:
    """The wrapped app: a login page anyone may see."""
    app = Flask("login-page")

    @app.get("/login")
    def login() -> str:
        return LOGIN_PAGE

    return app


class Hanging:
    """Calls that block until the test ends (a plugin stuck on its own I/O), counted as they
    come in."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.calls = 0

    def hang(self) -> None:
        with self.lock:
            self.calls += 1
        self.release.wait(60)

    @property
    def entered(self) -> int:
        with self.lock:
            return self.calls


class HungDirectory(Hanging):
    """`resolve_principal` of a directory that never answers."""

    __name__ = "hung-directory"

    @hookimpl
    def resolve_principal(self, scope: Any) -> Principal | None:
        self.hang()
        return None


class HeaderIdentity:
    """Who a request is from, by its ``x-user`` header, from memory."""

    __name__ = "header-identity"

    @hookimpl
    def resolve_principal(self, scope: Any) -> Principal | None:
        for key, value in scope["headers"]:
            if key == b"x-user":
                return Principal(value.decode(), "header", credential_id="test")
        return None


class HungAcl(Hanging):
    """`authorize_subscription` that never answers for the streams in `hangs_on` (every
    stream when None), and defers on the others."""

    __name__ = "hung-acl"

    def __init__(self, hangs_on: set[str] | None = None) -> None:
        super().__init__()
        self.hangs_on = hangs_on

    @hookimpl
    def authorize_subscription(self, principal: Principal, stream: str) -> bool | None:
        if self.hangs_on is None or stream in self.hangs_on:
            self.hang()
            return True
        return None


def client(gateway: Gateway) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=gateway)
    return httpx.AsyncClient(transport=transport, base_url="http://gateway.test")


async def answered_by_deadline(requests: list[Any]) -> list[httpx.Response]:
    """Every request's answer; fails unless all are in within `DEADLINE`."""
    try:
        async with asyncio.timeout(DEADLINE):
            return list(await asyncio.gather(*requests))
    except TimeoutError:
        raise AssertionError(f"some requests were not answered within {DEADLINE} s") from None


def assert_plugin_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["retry-after"]) > 0
    body = answer.json()
    assert body["error"] == PLUGIN_UNAVAILABLE and body["message"], body


async def assert_refused_only_when_asked(
    answers: list[httpx.Response], refusal: int, plugin: Hanging
) -> None:
    """Each answer is `refusal` (the plugin was asked and did not answer in time) or the 503 of
    a plugin that could not be asked; one refusal per call the plugin took."""
    refused = [a for a in answers if a.status_code == refusal]
    for answer in answers:
        if answer.status_code != refusal:
            assert_plugin_unavailable(answer)
    assert refused, "the calls the threads took were asked, and did not answer in time"
    # A thread that took a call may not be inside the plugin yet.
    await until(
        lambda: plugin.entered == len(refused),
        failure=lambda: f"{len(refused)} refused, {plugin.entered} calls reached the plugin",
    )


def test_hung_resolvers_answer_every_request_within_the_timeout_and_refuse_only_those_asked(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    directory = HungDirectory()
    gateway = Gateway(
        login_app(),
        log=log,
        plugins=[directory],
        settings=GatewaySettings(plugins=PluginSettings(timeout=TIMEOUT, hung_limit=NEVER_CAPPED)),
    )
    paths = ["/login", "/gateway/streams/mine/events"]

    async def main() -> None:
        async with client(gateway) as http:
            answers = await answered_by_deadline(
                [http.get(paths[n % 2], headers=JSON) for n in range(BURST)]
            )
            # A call asked of the resolver refuses the gateway's own route (401) and, on the
            # app's login page, leaves the page to the app, served to nobody: never held past
            # the deadline either way.
            served = [a for a in answers[::2] if a.status_code == 200]
            assert all(a.text == LOGIN_PAGE for a in served)
            refused = [a for a in answers[1::2] if a.status_code == 401]
            for answer in answers:
                if answer not in served and answer not in refused:
                    assert_plugin_unavailable(answer)
            asked = len(served) + len(refused)
            assert refused, "the calls the threads took were asked, and did not answer in time"
            await until(
                lambda: directory.entered == asked,
                failure=lambda: f"{asked} asked, {directory.entered} calls reached the plugin",
            )

    with caplog.at_level(logging.ERROR):
        try:
            asyncio.run(main())
        finally:
            directory.release.set()
    assert "'hung-directory' did not answer resolve_principal" in caplog.text


def test_a_request_no_identity_thread_could_take_in_time_is_a_503_never_a_401(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manager, "IDENTITY_THREADS", 0)  # no thread can ever be had
    directory = HungDirectory()
    gateway = Gateway(
        login_app(),
        log=log,
        plugins=[directory],
        settings=GatewaySettings(plugins=PluginSettings(timeout=0.2)),
    )

    async def main() -> None:
        async with client(gateway) as http:
            answers = await answered_by_deadline(
                [http.get(path) for path in ("/login", "/gateway/streams/mine/events")]
            )
            for answer in answers:
                assert_plugin_unavailable(answer)
        assert directory.entered == 0

    asyncio.run(main())


def test_a_resolver_at_its_hung_limit_is_not_asked_and_every_request_is_503_until_one_returns(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    directory = HungDirectory()
    gateway = Gateway(
        login_app(),
        log=log,
        plugins=[directory],
        settings=GatewaySettings(plugins=PluginSettings(timeout=0.2, hung_limit=2)),
    )

    async def main() -> None:
        async with client(gateway) as http:
            # Asked, and no answer within the timeout: refused, as a failed resolver is, on
            # the gateway's paths; the app's own login page is the app's, served to nobody.
            refused = await http.get("/gateway/streams/mine/events", headers=ALICE)
            assert refused.status_code == 401 and refused.json()["error"] == "unauthenticated"
            assert (await http.get("/login", headers=ALICE)).text == LOGIN_PAGE
            for path in ("/login", "/gateway/streams/mine/events"):
                assert_plugin_unavailable(await http.get(path, headers=ALICE))
            assert directory.entered == 2  # not asked again
            directory.release.set()

            async def login_page_served() -> bool:
                return (await http.get("/login")).text == LOGIN_PAGE

            await until(login_page_served)  # its calls returned: it is asked again

    with caplog.at_level(logging.ERROR):
        try:
            asyncio.run(main())
        finally:
            directory.release.set()
    assert "'hung-directory' has 2 calls hung" in caplog.text


def test_hung_authorization_answers_every_read_of_its_owner_within_the_timeout(
    log: EventLog,
) -> None:
    acl = HungAcl()
    gateway = Gateway(
        log=log,
        plugins=[HeaderIdentity(), acl],
        settings=GatewaySettings(plugins=PluginSettings(timeout=TIMEOUT, hung_limit=NEVER_CAPPED)),
    )

    async def main() -> None:
        async with client(gateway) as http:
            answers = await answered_by_deadline(
                [http.get("/gateway/streams/mine/events", headers=ALICE) for _ in range(BURST)]
            )
            await assert_refused_only_when_asked(answers, 403, acl)

    try:
        asyncio.run(main())
    finally:
        acl.release.set()


def test_a_plugin_hung_on_one_stream_holds_the_owner_of_another_no_longer_than_the_timeout(
    log: EventLog,
) -> None:
    acl = HungAcl(hangs_on={"stuck"})
    gateway = Gateway(
        log=log,
        plugins=[HeaderIdentity(), acl],
        settings=GatewaySettings(plugins=PluginSettings(timeout=TIMEOUT, hung_limit=NEVER_CAPPED)),
    )
    mine = "/gateway/streams/mine/events"

    async def main() -> None:
        async with client(gateway) as http:
            stuck = [
                asyncio.ensure_future(http.get("/gateway/streams/stuck/events", headers=ALICE))
                for _ in range(BURST)
            ]
            await until(lambda: acl.entered >= manager.AUTHORIZATION_THREADS)
            others = await answered_by_deadline(stuck)
            assert {a.status_code for a in others} <= {403, 503}
            # The hung calls still hang, out of everyone's way: the owner is served.
            [after] = await answered_by_deadline([http.get(mine, headers=ALICE)])
            assert after.status_code == 200, after.text
            assert [e["data"] for e in after.json()["events"]] == [{"text": "hi"}]
            assert not acl.release.is_set()

    try:
        asyncio.run(main())
    finally:
        acl.release.set()


def test_hung_authorization_never_holds_up_identity(log: EventLog) -> None:
    acl = HungAcl()
    # A timeout far beyond the test: the hung calls hold every authorization thread throughout.
    gateway = Gateway(
        login_app(),
        log=log,
        plugins=[HeaderIdentity(), acl],
        settings=GatewaySettings(plugins=PluginSettings(timeout=60)),
    )

    async def main() -> None:
        async with client(gateway) as http:
            held = [
                asyncio.ensure_future(http.get("/gateway/streams/mine/events", headers=ALICE))
                for _ in range(manager.AUTHORIZATION_THREADS + 4)
            ]
            await until(lambda: acl.entered == manager.AUTHORIZATION_THREADS)
            for _ in range(3):
                page = await answered_by_deadline([http.get("/login", headers=ALICE)])
                assert page[0].text == LOGIN_PAGE
            assert not any(read.done() for read in held)  # all still waiting on the plugin
            acl.release.set()
            assert {a.status_code for a in await asyncio.gather(*held)} == {200}

    try:
        asyncio.run(main())
    finally:
        acl.release.set()


def test_hung_identity_never_holds_up_authorization(log: EventLog) -> None:
    directory = HungDirectory()

    def everyone_reads(principal: Principal, stream: str) -> bool:
        return True

    acl = type("OpenAcl", (), {"__name__": "open-acl"})()
    acl.authorize_subscription = hookimpl(everyone_reads)
    gateway = Gateway(
        log=log,
        plugins=[directory, acl],
        settings=GatewaySettings(plugins=PluginSettings(timeout=60)),
    )
    plugins = gateway.plugins
    alice = Principal("alice", "header")

    async def main() -> None:
        held = [
            asyncio.ensure_future(plugins.resolve_principal({"type": "http", "headers": []}))
            for _ in range(manager.IDENTITY_THREADS + 4)
        ]
        await until(lambda: directory.entered == manager.IDENTITY_THREADS)
        allowed = await answered_by_deadline([plugins.authorize_subscription(alice, "mine")])
        assert allowed == [True]
        assert not any(call.done() for call in held)
        directory.release.set()
        assert await asyncio.gather(*held) == [None] * len(held)

    try:
        asyncio.run(main())
    finally:
        directory.release.set()
