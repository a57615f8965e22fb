"""The heartbeat routes over HTTP: who may ask about which session, what careless and hostile
paths get, and the routes alone around another ASGI app."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gateway_kit import (
    EventLog,
    Gateway,
    HeartbeatDecider,
    HeartbeatRoutes,
    IdentityMiddleware,
    hookimpl,
)
from gateway_kit.bindings.claims import claims_of
from gateway_kit.bindings.names import tmux_session_problem
from gateway_kit.bindings.tmux_sessions import bindings_of
from gateway_kit.execution.decision_log import DecisionLog
from gateway_kit.execution.tables import decisions
from gateway_kit.hooks import PluginContext, Plugins
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from tests.support.serving import serve_in_thread


def bearer(log: EventLog, user: str, *scopes: str) -> dict[str, str]:
    return {"authorization": f"Bearer {ApiTokens(log).create(user, scopes=scopes)[1]}"}


@pytest.fixture
def site(log: EventLog) -> Iterator[tuple[str, dict[str, str]]]:
    """A gateway (no pane reader) and an operator's headers."""
    gateway = Gateway(log=log, load_entry_points=False, block_plugins=("tmux_pane",))
    with serve_in_thread(gateway) as url:
        yield url, bearer(log, "ops", "operator")


def test_asking_needs_a_principal(site: tuple[str, dict[str, str]]) -> None:
    url, _ = site
    answer = httpx.get(f"{url}/gateway/heartbeat/agent-1")
    assert answer.status_code == 401 and answer.json()["error"] == "unauthenticated"


def test_a_decision_and_the_list_of_decisions(
    site: tuple[str, dict[str, str]], log: EventLog
) -> None:
    url, auth = site
    first = httpx.get(f"{url}/gateway/heartbeat/agent-1", headers=auth).json()
    assert (first["state"], first["decision"], first["reason"]) == (
        "UNKNOWN",
        "skip",
        "no_evidence",
    )
    httpx.get(f"{url}/gateway/heartbeat/agent-1", headers=auth)
    listed = httpx.get(f"{url}/gateway/heartbeat/agent-1/decisions?limit=1", headers=auth).json()
    assert listed["tmux_session_id"] == "agent-1" and len(listed["decisions"]) == 1
    [recorded] = DecisionLog(log).recent("agent-1")  # the second repeats the first
    assert (recorded["reason"], recorded["repeats"]) == ("no_evidence", 2)
    wrong = httpx.post(f"{url}/gateway/heartbeat/agent-1", headers=auth)
    assert wrong.status_code == 405 and wrong.json()["error"] == "method_not_allowed"


segments = st.one_of(
    st.text(max_size=300),
    st.sampled_from(
        ["", " ", "%00", "\x00", "a\x00b", "a\tb", "x" * 257, "agent 1", "ägent", "a/b"]
    ),
)
limits = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.integers(-5, 600).map(str),
    st.just("0" * 10 + "9" * 5000),  # more digits than Python reads as an integer
)


def all_decisions(log: EventLog) -> int:
    with log.tables.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(decisions)).scalar_one())


def test_any_path_or_limit_is_an_answer_or_a_400_json_never_a_5xx(
    site: tuple[str, dict[str, str]], log: EventLog
) -> None:
    url, auth = site
    with httpx.Client(base_url=url, headers=auth) as client:

        @settings(max_examples=150, deadline=None, derandomize=True)
        @given(tmux=segments, limit=limits)
        def check(tmux: str, limit: str | None) -> None:
            assume(tmux not in {".", ".."})  # dot segments: the client resolves them away
            valid = bool(tmux) and tmux_session_problem(tmux) is None
            # An id no session can have is not asked of the database (PostgreSQL refuses NUL).
            newest = DecisionLog(log).recent(tmux, 1) if valid else []
            before = newest[0]["repeats"] if newest else 0
            written = all_decisions(log)
            path = "/gateway/heartbeat/" + quote(tmux, safe="")
            decided = client.get(path)
            listed = client.get(
                path + "/decisions", params={} if limit is None else {"limit": limit}
            )
            for answer in (decided, listed):
                assert answer.status_code < 500, answer.text
                assert answer.headers["content-type"].startswith("application/json")
            if not tmux:
                assert decided.status_code == 404
                return
            if tmux_session_problem(tmux) is not None:
                assert decided.status_code == listed.status_code == 400
                assert decided.json()["error"] == "invalid_tmux_session"
                assert all_decisions(log) == written  # nothing written
                return
            assert decided.status_code == 200 and decided.json()["tmux_session_id"] == tmux
            newest = DecisionLog(log).recent(tmux, 1)[0]  # the answer, or one it repeats
            assert newest["decided_at"] == decided.json()["decided_at"]
            assert newest["repeats"] == before + 1
            good_limit = limit is None or (
                limit.isdigit() and len(limit) <= 6 and 1 <= int(limit) <= 500
            )
            assert listed.status_code == (200 if good_limit else 400), listed.text

        check()


def test_the_routes_alone_around_a_starlette_app(log: EventLog) -> None:
    async def hello(request: StarletteRequest) -> PlainTextResponse:
        return PlainTextResponse("from starlette")

    context = PluginContext(log=log)
    plugins = Plugins(load_entry_points=False, context=context, block=("tmux_pane",))
    decider = HeartbeatDecider(log, plugins)
    routes = HeartbeatRoutes(
        Starlette(routes=[Route("/hello", hello)]), decider=decider, prefix="/gw"
    )
    app = IdentityMiddleware(routes, plugins=plugins, allow_anonymous=True)

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            assert (await client.get("/hello")).text == "from starlette"
            decided = await client.get("/gw/heartbeat/agent-1")
            assert decided.json()["reason"] == "no_evidence"

    asyncio.run(main())


class SessionReader:
    """A pane reader that notes which sessions it was asked to look at."""

    __name__ = "pane-probe"

    def __init__(self) -> None:
        self.asked: list[str] = []

    @hookimpl
    def heartbeat_fallback(self, tmux_session_id: str) -> str:
        self.asked.append(tmux_session_id)
        return "allow"


def test_only_the_holder_a_reader_of_a_bound_stream_or_an_operator_may_ask(
    log: EventLog,
) -> None:
    probe = SessionReader()
    gateway = Gateway(log=log, load_entry_points=False, plugins=[probe])
    bindings_of(log).bind("alice-conv", "agent-a", "alice")
    StreamOwners(log).declare("alice-conv", "alice")
    claims_of(log).claim("agent-b", "bob")
    alice, bob, carol = (bearer(log, user) for user in ("alice", "bob", "carol"))
    ops = bearer(log, "ops", "operator")
    with serve_in_thread(gateway) as url, httpx.Client(base_url=url) as client:
        for path in ("/gateway/heartbeat/agent-a", "/gateway/heartbeat/agent-a/decisions"):
            assert client.get(path, headers=alice).status_code == 200
            assert client.get(path, headers=ops).status_code == 200
            unknown = client.get(path.replace("agent-a", "agent-nobody"), headers=bob)
            for someone in (bob, carol):
                refused = client.get(path, headers=someone)
                # Another's session and one that does not exist are answered alike.
                assert refused.status_code == unknown.status_code == 404
                assert refused.json()["error"] == unknown.json()["error"]
                assert refused.json()["error"] == "tmux_session_not_found"
            assert client.get(path).status_code == 401
        assert client.get("/gateway/heartbeat/agent-b", headers=bob).status_code == 200
        assert client.get("/gateway/heartbeat/agent-b", headers=alice).status_code == 404
    # The panes of the sessions refused were never looked at.
    assert set(probe.asked) == {"agent-a", "agent-b"}
    assert "agent-nobody" not in probe.asked


def test_a_reader_that_authorize_subscription_lets_in_may_ask(log: EventLog) -> None:
    class SharedWithCarol:
        __name__ = "share-with-carol"

        @hookimpl
        def authorize_subscription(self, principal: Any, stream: str) -> bool | None:
            return True if principal.user_id == "carol" else None

    gateway = Gateway(
        log=log,
        load_entry_points=False,
        block_plugins=("tmux_pane",),
        plugins=[SharedWithCarol()],
    )
    bindings_of(log).bind("alice-conv", "agent-a", "alice")
    with serve_in_thread(gateway) as url, httpx.Client(base_url=url) as client:
        shared = client.get("/gateway/heartbeat/agent-a", headers=bearer(log, "carol"))
        assert shared.status_code == 200, shared.text
        unbound = client.get("/gateway/heartbeat/agent-z", headers=bearer(log, "carol"))
        assert unbound.status_code == 404


def test_whoever_asks_about_any_session_the_answer_says_nothing_of_others(log: EventLog) -> None:
    gateway = Gateway(log=log, load_entry_points=False, block_plugins=("tmux_pane",))
    claims_of(log).claim("held-by-alice", "alice")
    callers = {"alice": bearer(log, "alice"), "bob": bearer(log, "bob"), "nobody": {}}
    names = st.one_of(
        st.sampled_from(["held-by-alice", "agent-1", "%0", "held-by-alice:0", "x" * 256]),
        st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=40),
    )
    with serve_in_thread(gateway) as url, httpx.Client(base_url=url) as client:

        @settings(max_examples=120, deadline=None, derandomize=True)
        @given(name=names, caller=st.sampled_from(sorted(callers)), listing=st.booleans())
        def check(name: str, caller: str, listing: bool) -> None:
            assume(name not in {".", ".."})
            path = "/gateway/heartbeat/" + quote(name, safe="") + ("/decisions" if listing else "")
            written = all_decisions(log)
            answer = client.get(path, headers=callers[caller])
            assert answer.status_code < 500 and answer.headers["content-type"].startswith(
                "application/json"
            )
            if caller == "nobody":
                assert answer.status_code == 401  # before anything is looked up
            elif tmux_session_problem(name) is not None:
                assert answer.status_code == 400
            elif name == "held-by-alice" and caller == "alice":
                assert answer.status_code == 200
                return
            else:
                assert answer.status_code == 404
                assert answer.json()["error"] == "tmux_session_not_found"
            assert all_decisions(log) == written  # a refused question decides nothing

        check()
