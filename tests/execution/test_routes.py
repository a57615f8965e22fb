"""The heartbeat routes over HTTP: who may ask, what careless and hostile paths get, and the
routes alone around another ASGI app."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
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

from gateway_kit import EventLog, Gateway, HeartbeatDecider, HeartbeatRoutes, IdentityMiddleware
from gateway_kit.execution.decision_log import DecisionLog
from gateway_kit.execution.names import tmux_session_problem
from gateway_kit.execution.tables import decisions
from gateway_kit.hooks import PluginContext, Plugins
from gateway_kit.identity.tokens import ApiTokens

from ..serving import serve_in_thread


@pytest.fixture
def site(log: EventLog) -> Iterator[tuple[str, dict[str, str]]]:
    gateway = Gateway(log=log, load_entry_points=False)
    token = ApiTokens(log).create("operator")[1]
    with serve_in_thread(gateway) as url:
        yield url, {"authorization": f"Bearer {token}"}


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
    assert len(DecisionLog(log).recent("agent-1")) == 2
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
            before = len(DecisionLog(log).recent(tmux, 500)) if valid else 0
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
            assert len(DecisionLog(log).recent(tmux, 500)) == min(before + 1, 500)
            good_limit = limit is None or (
                limit.isdigit() and len(limit) <= 6 and 1 <= int(limit) <= 500
            )
            assert listed.status_code == (200 if good_limit else 400), listed.text

        check()


def test_the_routes_alone_around_a_starlette_app(log: EventLog) -> None:
    async def hello(request: StarletteRequest) -> PlainTextResponse:
        return PlainTextResponse("from starlette")

    plugins = Plugins(load_entry_points=False, context=PluginContext(log=log))
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
