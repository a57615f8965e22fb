"""Ended logins cost each process a bounded memory: it keeps the answers for the logins asked
about lately, and asks the database about any other. An ended login is refused all the same,
in every process, however many logins ended since."""

from __future__ import annotations

import time

import httpx
import pytest

from gateway_kit import EventLog
from gateway_kit.identity import credentials
from gateway_kit.identity.credentials import CredentialView, credentials_of
from gateway_kit.identity.flask_session import FlaskSessionReader, FlaskSessionSettings
from gateway_kit.identity.logins import EndedLogins
from tests.support.flask_site import SECRET, assert_error, log_in, strict_gateway, with_clients

REMEMBERED = 8  # answers a view keeps here: far fewer than the logins that end
CHURN = 5 * REMEMBERED  # logins that end after the one an attacker kept a cookie of
JSON = {"accept": "application/json"}
PAGE = "/gateway/usage"  # needs a principal, and nothing else


def credential_of(cookie: str) -> str:
    login = FlaskSessionReader(FlaskSessionSettings(secret_key=SECRET)).login(f"session={cookie}")
    assert login is not None
    return login.credential_id


def test_ended_logins_stay_refused_in_every_process_past_what_memory_holds(
    log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(credentials, "LOGINS_REMEMBERED", REMEMBERED)
    first, second = EventLog(log_url), EventLog(log_url)  # two processes' logs
    gateways = strict_gateway(first), strict_gateway(second)
    views = credentials_of(first), credentials_of(second)

    async def body(victim: httpx.AsyncClient, user: httpx.AsyncClient) -> None:
        csrf = await log_in(victim, "alice")
        kept = victim.cookies["session"]  # what an attacker copied before the logout
        assert (await victim.get(PAGE, headers=JSON)).status_code == 200
        assert (await victim.post("/logout", headers={"x-csrf-token": csrf})).status_code == 200
        held = []
        for _ in range(CHURN):  # logins that come and go after it, each asked about
            csrf = await log_in(user, "bob")
            assert (await user.get(PAGE, headers=JSON)).status_code == 200
            assert (await user.post("/logout", headers={"x-csrf-token": csrf})).status_code == 200
            held.append(views[0].logins_held)
        assert max(held) <= REMEMBERED, held
        await log_in(user, "bob")  # a login that did not end
        assert not views[0].ended_in_memory(credential_of(kept), 0.0)  # let go of
        for gateway, view in zip(gateways, views, strict=True):
            other = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=gateway, client=("127.0.0.1", 50000)),
                base_url="http://app.test",
            )
            async with other:
                copied = await other.get(PAGE, headers={**JSON, "cookie": f"session={kept}"})
                assert_error(copied, 401, "unauthenticated")
                live = {**JSON, "cookie": f"session={user.cookies['session']}"}
                assert (await other.get(PAGE, headers=live)).status_code == 200
            assert view.logins_held <= REMEMBERED

    try:
        with_clients(gateways[0], body, count=2)
    finally:
        first.close()
        second.close()


def test_an_end_committed_while_the_database_is_asked_is_not_lost(
    log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, other = EventLog(log_url), EventLog(log_url)
    try:
        view = CredentialView(log, logins_remembered=REMEMBERED)
        view.start = lambda: None  # type: ignore[method-assign]  # the test reads, alone
        view.refresh()
        select = log.tables.select

        def ended_meanwhile(statement: object, params: object = None) -> object:
            rows = select(statement, params)  # type: ignore[arg-type]
            if params == {"credential_id": "login:x"}:
                # The row as it was read; the login ends before the answer is kept, and the
                # view reads that change at once.
                EndedLogins(other).end("login:x", "alice")
                assert view.refresh() == 1
            return rows

        monkeypatch.setattr(log.tables, "select", ended_meanwhile)
        assert view.login_ended("login:x")
        monkeypatch.setattr(log.tables, "select", select)
        assert view.login_ended("login:x")  # from memory, which kept the end
    finally:
        log.close()
        other.close()


def test_a_login_a_stream_holds_open_stays_in_memory_past_the_bound(log_url: str) -> None:
    log, other = EventLog(log_url), EventLog(log_url)
    try:
        view = CredentialView(log, logins_remembered=REMEMBERED)
        ended = EndedLogins(other)
        ended.end("login:held", "alice")
        view.refresh()
        opened = time.time() - 60
        assert view.login_ended("login:held", opened)
        unwatch = view.watch("login:held", lambda: None)
        try:
            for n in range(CHURN):
                ended.end(f"login:{n}", "bob")
            view.refresh()
            for n in range(CHURN):
                assert view.login_ended(f"login:{n}")
            # What a stream asks when it opens, and never the database: still known.
            assert view.ended_in_memory("login:held", opened)
            assert view.logins_held <= REMEMBERED + 1
        finally:
            unwatch()
    finally:
        log.close()
        other.close()
