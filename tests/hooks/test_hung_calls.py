"""A plugin call that never returns starves nobody: other requests are served, the plugin is
no longer asked once it has `plugin_hung_limit` calls hung (logged with its name), and it is
asked again once they return. Lifecycle hooks and billing: `tests/runs/test_hung_hooks.py`;
identity and authorization under many hung calls: `test_hung_access.py`."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import httpx
import pytest

from gateway_kit import EventLog, Gateway, GatewaySettings, PluginSettings, Principal, hookimpl
from gateway_kit.hooks.threads import HookThreads, NotStarted
from gateway_kit.http.errors import PLUGIN_UNAVAILABLE
from gateway_kit.identity.owners import StreamOwners
from tests.support.plugins import plugin
from tests.support.waiting import until

JSON = {"accept": "application/json"}
ALICE = {"x-user": "alice", **JSON}


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        event_log.append("mine", "Message", {"text": "hi"}, run_id="run-mine")
        StreamOwners(event_log).declare("mine", "alice")
        yield event_log


def by_header(scope: dict[str, object]) -> Principal | None:
    for key, value in scope["headers"]:  # type: ignore[attr-defined]
        if key == b"x-user":
            return Principal(value.decode(), "header", credential_id="test")
    return None


class StuckAcl:
    """A plugin whose `authorize_subscription` hangs on stream ``stuck`` until released, and
    defers on every other stream (to the built-in owner-only answer)."""

    __name__ = "stuck-acl"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked: list[str] = []
        self.lock = threading.Lock()

    @hookimpl
    def authorize_subscription(self, principal: Principal, stream: str) -> bool | None:
        with self.lock:
            self.asked.append(stream)
        if stream == "stuck":
            self.release.wait(30)  # a plugin blocked on its own I/O
            return True
        return None

    def entered(self, stream: str) -> int:
        with self.lock:
            return self.asked.count(stream)


def client(gateway: Gateway) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=gateway)
    return httpx.AsyncClient(transport=transport, base_url="http://gateway.test")


def assert_plugin_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["retry-after"]) > 0
    body = answer.json()
    assert body["error"] == PLUGIN_UNAVAILABLE and body["message"], body


def test_a_plugin_with_too_many_hung_calls_is_not_asked_and_its_reads_are_503_until_they_return(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    acl = StuckAcl()

    def classify(error: str) -> str:
        return "KNOWN_ERROR"

    gateway = Gateway(
        log=log,
        plugins=[
            plugin("header-identity", resolve_principal=by_header),
            acl,
            plugin("classifier", classify_error=classify),
        ],
        settings=GatewaySettings(plugins=PluginSettings(timeout=0.2, hung_limit=2)),
    )

    async def main() -> None:
        async with client(gateway) as http:
            for _ in range(2):
                stuck = await http.get("/gateway/streams/stuck/events", headers=ALICE)
                # Asked, and not answered within the plugin timeout: refused.
                assert stuck.status_code == 403
            mine = await http.get("/gateway/streams/mine/events", headers=ALICE)
            # Not asked (it might have refused, it might have allowed): no verdict, try again.
            assert_plugin_unavailable(mine)
            assert acl.entered("mine") == 0
            # Other plugins are asked as before.
            answer = await gateway.plugins.classify_error("boom", None, timeout=1.0)
            assert answer == "KNOWN_ERROR"
            acl.release.set()

            async def served() -> bool:
                answer = await http.get("/gateway/streams/mine/events", headers=ALICE)
                return answer.status_code == 200

            await until(served)  # its hung calls returned: it is asked again
            assert acl.entered("mine") >= 1

    with caplog.at_level(logging.ERROR):
        try:
            asyncio.run(main())
        finally:
            acl.release.set()
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("'stuck-acl' did not answer authorize_subscription" in m for m in messages)
    assert any("'stuck-acl' has 2 calls hung" in m for m in messages)


def test_a_queued_call_spends_its_timeout_waiting_and_is_never_run_once_it_is_up() -> None:
    threads = HookThreads(1, "test-hook")
    busy, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def holding() -> str:
        busy.set()
        release.wait(30)
        return "held"

    async def main() -> None:
        held = asyncio.create_task(threads.run(holding, 30))
        await until(busy.is_set)
        # Its timeout counts while it waits for the one thread: it ends unstarted.
        with pytest.raises(NotStarted):
            await threads.run(lambda: ran.append("queued"), 0.2)
        release.set()
        assert await held == "held"
        assert await threads.run(lambda: "next", 5) == "next"  # the queue moved past it
        assert ran == []

    try:
        asyncio.run(main())
    finally:
        release.set()


def test_in_a_pool_timed_from_the_start_a_hung_call_is_replaced_and_the_next_gets_its_time() -> (
    None
):
    threads = HookThreads(1, "test-hook", count_queued=False)
    release = threading.Event()

    async def main() -> None:
        hung = asyncio.create_task(threads.run(lambda: release.wait(30), 0.2))
        # Queued behind the hung call: it still gets its whole timeout once it starts.
        answer = await threads.run(lambda: "answered", 0.2)
        assert answer == "answered"
        with pytest.raises(TimeoutError):
            await hung
        assert threads.hung == 1
        release.set()
        await until(lambda: threads.hung == 0)
        assert await threads.run(lambda: "again", 0.2) == "again"

    try:
        asyncio.run(main())
    finally:
        release.set()


def test_a_call_whose_caller_left_before_it_started_is_still_counted_hung() -> None:
    threads = HookThreads(1, "test-hook", count_queued=False)
    busy, entered, release = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        busy.set()
        release.wait(30)

    def stuck() -> None:
        entered.set()
        release.wait(30)

    async def main() -> None:
        running = asyncio.create_task(threads.run(first, 0.2))
        await until(busy.is_set)
        left = asyncio.create_task(threads.run(stuck, 0.2))
        await asyncio.sleep(0)  # one turn of the loop: the call is queued
        left.cancel()  # its client went away before it started
        await until(entered.is_set)  # it runs all the same, in a fresh thread
        answer = await asyncio.wait_for(threads.run(lambda: "answered", 0.2), 5)
        assert answer == "answered"  # it did not keep its thread from the next call
        release.set()
        with pytest.raises(TimeoutError):
            await running

    try:
        asyncio.run(main())
    finally:
        release.set()


@pytest.mark.parametrize("count_queued", [True, False], ids=["timed-from-queue", "from-start"])
def test_a_call_after_a_backlog_whose_last_call_hung_gets_a_thread(count_queued: bool) -> None:
    threads = HookThreads(1, "test-hook", count_queued=count_queued)
    busy, finish, hung, release = (threading.Event() for _ in range(4))

    def first() -> str:
        busy.set()
        finish.wait(30)
        return "first"

    def hanging() -> None:
        hung.set()
        release.wait(30)

    async def main() -> None:
        running = asyncio.create_task(threads.run(first, 30))
        await until(busy.is_set)
        behind = asyncio.create_task(threads.run(hanging, 0.2))
        await asyncio.sleep(0)  # one turn of the loop: queued behind the first call
        finish.set()
        assert await running == "first"
        await until(hung.is_set)  # the one thread took it as it finished the first
        with pytest.raises(TimeoutError):
            await behind
        # Its thread is hung, nothing was queued then: the next call gets a fresh thread.
        assert await asyncio.wait_for(threads.run(lambda: "next", 5), 10) == "next"

    try:
        asyncio.run(main())
    finally:
        release.set()
