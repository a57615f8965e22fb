"""The identity stage under random credentials: whatever a client sends, the answer is the one
its credentials earn, a 4xx is the JSON error body, and a refused request writes nothing.

Each request carries a random mix of: an ``Authorization`` header (a live API token, a revoked
one, a host-login token, a token with one character changed, another scheme, random text), a
session cookie (alice's, bob's, signed with a key nobody has, expired, random text), a CSRF
header (the session's, a wrong one, none), and a method, path and body for the gateway's routes
or the legacy poll. What it must get follows from those alone:

- a Bearer ``Authorization`` header that is not a live token of its kind (from its place) is a
  401, whatever cookie comes with it; a header of another scheme (Basic, random text) is no
  credential for the gateway, and the wrapped app's own routes get it;
- without a valid credential, every gateway route and the legacy poll are a 401;
- a cookie principal's unsafe request (or its ask for a legacy socket token) without the
  session's CSRF token is a 403;
- bob never reads alice's stream (403; a run of it is a 404, as a run that does not exist);
- a 4xx leaves every row the gateway keeps as it was;
- a method no route takes is a 405 for anyone (the routes are public knowledge).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tables import API_TOKENS, SOCKET_TICKETS, STREAM_OWNERS
from gateway_kit.identity.tokens import ApiTokens, TokenKind
from gateway_kit.testing import FakeGoose
from tests.support.flask_site import flask_app, signed_cookie
from tests.support.raw_requests import (
    ALLOWED_STATUSES,
    Call,
    assert_json_error,
    running_gateway,
    wait_run_ended,
    writes,
)

EXAMPLES = 150
ALICE_STREAM = "alice-conv"
ALICE_RUN = "alice-run"
CSRF = "the-sessions-csrf-token"
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class Credentials:
    """What the fixture made: alice's and bob's tokens, live and revoked."""

    alice_token: str
    bob_token: str
    revoked_token: str
    host_token: str


@dataclass(frozen=True)
class Sent:
    authorization: tuple[str, str | None]  # (what it is, the header's value)
    cookie: tuple[str, str | None]
    csrf: str | None
    method: str
    path: str
    body: bytes


def rows(log: EventLog) -> tuple[Any, ...]:
    tables = (STREAM_OWNERS, API_TOKENS, SOCKET_TICKETS)
    with log.tables.engine.connect() as conn:
        kept = tuple(
            tuple(map(tuple, conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY 1"))))
            for t in tables
        )
    return (writes(log), kept)


def _changes(before: Any, after: Any) -> list[Any]:
    """What differs between two snapshots of `rows`, for a failure's message."""
    flat = [(before[0], after[0]), *list(zip(before[1], after[1], strict=True))]
    return [(b, a) for b, a in flat if b != a]


def authorizations(made: Credentials) -> st.SearchStrategy[tuple[str, str | None]]:
    def changed(token: str, index: int) -> str:
        i = index % len(token)
        return token[:i] + ("B" if token[i] != "B" else "C") + token[i + 1 :]

    return st.one_of(
        st.just(("none", None)),
        st.sampled_from(
            [
                ("alice", f"Bearer {made.alice_token}"),
                ("bob", f"Bearer {made.bob_token}"),
                ("alice", f"bearer   {made.alice_token}"),
                ("bad", f"Bearer {made.revoked_token}"),
                ("bad", f"Bearer {made.host_token}"),  # a host token, from no local Host
                ("bad", "Basic YWxpY2U6YWxpY2UtcHc="),
                ("bad", "Bearer"),
                ("bad", ""),
            ]
        ),
        st.integers(0, 80).map(lambda i: ("bad", f"Bearer {changed(made.alice_token, i)}")),
        st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=60).map(
            lambda text: ("bad", text)
        ),
    )


def cookies() -> st.SearchStrategy[tuple[str, str | None]]:
    alice = signed_cookie({"username": "alice", "login_id": "a1", "csrf_token": CSRF})
    bob = signed_cookie({"username": "bob", "login_id": "b1", "csrf_token": CSRF})
    return st.one_of(
        st.sampled_from(
            [
                ("none", None),
                ("alice", f"session={alice}"),
                ("bob", f"other=1; session={bob}"),
                ("none", "session=" + signed_cookie({"username": "alice"}, key="nobodys-key")),
                (
                    "none",
                    "session="
                    + signed_cookie({"username": "alice"}, at=time.time() - 40 * 24 * 3600),
                ),
                ("none", "session=" + alice[:-3] + "abc"),
                ("none", f"session={alice}; session=garbage"[::-1]),
            ]
        ),
        st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=40).map(
            lambda text: ("none", f"session={text}")
        ),
    )


PATHS = st.sampled_from(
    [
        ("GET", f"/gateway/streams/{ALICE_STREAM}/events?limit=5"),
        ("GET", f"/gateway/runs/{ALICE_RUN}/events"),
        ("GET", f"/gateway/runs/{ALICE_RUN}"),
        ("GET", f"/api/tasks/{ALICE_RUN}?from=0"),
        ("POST", f"/gateway/runs/{ALICE_RUN}/cancel"),
        ("POST", "/gateway/streams/bob-new/runs"),
        ("DELETE", f"/gateway/streams/{ALICE_STREAM}/events"),
        ("POST", "/gateway/socket-tickets"),
        ("GET", "/api/socket-token"),
        ("GET", f"/gateway/streams/{ALICE_STREAM}/presence"),
        ("GET", "/api/csrf-token"),  # the wrapped app's, open to anyone
    ]
)


@pytest.fixture
def made_log(sqlite_url: str) -> Iterator[tuple[str, Credentials]]:
    with EventLog(sqlite_url) as log:
        log.append(ALICE_STREAM, "Message", {"text": "alice's"}, run_id=ALICE_RUN)
        StreamOwners(log).declare(ALICE_STREAM, "alice")
        tokens = ApiTokens(log)
        revoked, revoked_token = tokens.create("alice")
        tokens.revoke(revoked.token_id)
        made = Credentials(
            alice_token=tokens.create("alice")[1],
            bob_token=tokens.create("bob")[1],
            revoked_token=revoked_token,
            host_token=tokens.create("alice", kind=TokenKind.HOST)[1],
        )
    yield sqlite_url, made


def bearer(value: str | None) -> bool:
    words = (value or "").split(None, 1)
    return bool(words) and words[0].lower() == "bearer"


def expected(sent: Sent, owners: dict[str, str]) -> set[int]:
    """The statuses `sent` may get, from its credentials alone (and who started a run of a
    new stream first: `owners`)."""
    kind, value = sent.authorization
    if kind == "bad" and not bearer(value):
        kind = "none"  # another scheme: the wrapped app's business, no credential here
    if kind == "bad" and sent.path == "/api/csrf-token":
        return {200}  # the app's own route: an Authorization header there is the app's business
    if kind == "bad":
        return {401}  # refused by the identity stage, before any route of the gateway
    who = kind if kind != "none" else sent.cookie[0]
    by_cookie = kind == "none" and who != "none"
    unsafe = sent.method in UNSAFE and sent.path.startswith("/gateway")
    unsafe = unsafe or sent.path == "/api/socket-token"  # a GET that hands out a credential
    if by_cookie and unsafe and sent.csrf != CSRF:
        return {403}  # refused by the identity stage too
    if sent.method == "DELETE":
        return {405}  # no route takes it, whoever asks: that says nothing of anyone's data
    if sent.path == "/api/csrf-token":
        return {200}
    if who == "none":
        return {401}
    path = sent.path
    if path == f"/gateway/runs/{ALICE_RUN}" or path.endswith("/cancel"):
        return {404}  # a run the app wrote itself: the run API does not know it, for anyone
    if who == "bob" and (ALICE_RUN in path or ALICE_STREAM in path):
        # Another user's run is answered as one that does not exist, whatever the route.
        return {404} if ALICE_RUN in path else {403}
    if path.endswith("/runs"):
        if owners.get(path, who) != who:
            return {403}  # another user's run made the stream theirs
        return {200, 409}  # a new stream is whoever starts it first's; one run at a time
    return {200, 204}


def who_of(sent: Sent) -> str:
    kind, value = sent.authorization
    return kind if kind not in ("none", "bad") and bearer(value) else sent.cookie[0]


def test_every_request_gets_what_its_credentials_earn(
    made_log: tuple[str, Credentials],
) -> None:
    log_url, made = made_log
    fake = FakeGoose(ping_interval=0.05)

    async def main() -> None:
        async with running_gateway(log_url, fake, app=flask_app(None), allow_anonymous=False) as (
            gateway,
            log,
        ):

            @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
            @given(
                authorization=authorizations(made),
                cookie=cookies(),
                csrf=st.sampled_from([None, CSRF, "not-the-token"]),
                route=PATHS,
            )
            def check(
                authorization: tuple[str, str | None],
                cookie: tuple[str, str | None],
                csrf: str | None,
                route: tuple[str, str],
            ) -> None:
                method, target = route
                path, _, query = target.partition("?")
                body = b'{"message": "hi"}' if method == "POST" else b""
                sent = Sent(authorization, cookie, csrf, method, path, body)
                headers = [(b"content-type", b"application/json"), (b"host", b"app.test")]
                if authorization[1] is not None:
                    headers.append((b"authorization", authorization[1].encode("latin-1")))
                if cookie[1] is not None:
                    headers.append((b"cookie", cookie[1].encode("latin-1")))
                if csrf is not None:
                    headers.append((b"x-csrf-token", csrf.encode()))
                call = Call(method, path.encode(), query.encode(), headers, body)
                before = rows(log)
                answer = asyncio.run_coroutine_threadsafe(call(gateway), loop).result(30)
                assert answer.status in ALLOWED_STATUSES, (sent, answer.status, answer.body)
                allowed = expected(sent, owners)
                assert answer.status in allowed, (sent, answer.status, answer.body[:200])
                if answer.status >= 400:
                    assert_json_error(answer, answer.status)
                    after = rows(log)
                    assert after == before, (sent, _changes(before, after))
                if answer.status == 200 and path.endswith("/runs"):
                    owners.setdefault(path, who_of(sent))
                    run_id = answer.json()["run_id"]
                    # Its turn runs to its end before the next example looks at the rows.
                    asyncio.run_coroutine_threadsafe(wait_run_ended(gateway, run_id), loop).result(
                        30
                    )

            owners: dict[str, str] = {}
            loop = asyncio.get_running_loop()
            await asyncio.to_thread(check)

    asyncio.run(main())
