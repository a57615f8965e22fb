"""Credentials from memory: tokens are checked without the database, the memory reads only
what changed, ended logins that can no longer matter are deleted, and a view that cannot be
read fails closed. What memory keeps of ended logins: `test_login_memory.py`."""

from __future__ import annotations

import time

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway
from gateway_kit.exceptions import DatabaseUnavailable
from gateway_kit.identity.credentials import CredentialView
from gateway_kit.identity.logins import EndedLogins
from gateway_kit.identity.tables import REVOKED_LOGINS, api_tokens, revoked_logins
from gateway_kit.identity.tokens import ApiTokens
from tests.support.flask_site import flask_app, signed_cookie, with_clients
from tests.support.waiting import wait_until

PAGE = "/gateway/streams/carol-work/events"
JSON = {"accept": "application/json"}
WAIT = 3.0  # seconds a request may take before it counts as held up


def test_a_refresh_reads_only_the_rows_changed_since_the_last(log_url: str) -> None:
    log, other = EventLog(log_url), EventLog(log_url)
    try:
        ended, tokens = EndedLogins(other), ApiTokens(other)
        for i in range(40):
            ended.end(f"login:{i}", "alice")
        made = [tokens.create("carol")[0] for _ in range(10)]
        view = CredentialView(log)
        # The first read: every token; no ended login (each is asked for when it is needed).
        assert view.refresh() == 10
        assert view.refresh() == 0
        ended.end("login:new", "bob")
        tokens.revoke(made[3].token_id)
        assert view.refresh() == 2  # the two changes, not the 10 tokens again
        assert view.login_ended("login:new") and view.login_ended("login:7")
        assert not view.token_live(made[3].token_id) and view.token_live(made[4].token_id)
        assert view.rows_read == 12
    finally:
        log.close()
        other.close()


def test_pruning_deletes_ended_logins_past_the_cookies_lifetime_and_keeps_recent_ones(
    log_url: str,
) -> None:
    log = EventLog(log_url)
    try:
        day = 24 * 3600.0
        with log.tables.transaction() as conn:
            for i, age in enumerate((40 * day, 32 * day, 30 * day, 1.0)):
                conn.execute(
                    revoked_logins.insert().values(
                        credential_id=f"login:{i}", user_id="alice", revoked_at=time.time() - age
                    )
                )
        ended = EndedLogins(log)
        assert ended.prune(31 * day) == 2
        assert kept(log) == ["login:2", "login:3"]
        view = CredentialView(log)
        view.refresh()
        assert view.login_ended("login:3") and not view.login_ended("login:0")
    finally:
        log.close()


def test_the_cookie_resolver_prunes_with_the_apps_cookie_lifetime(sqlite_url: str) -> None:
    log = EventLog(sqlite_url)
    try:
        with log.tables.transaction() as conn:
            for i, age in enumerate((7200.0, 10.0)):
                conn.execute(
                    revoked_logins.insert().values(
                        credential_id=f"login:{i}", user_id="alice", revoked_at=time.time() - age
                    )
                )
        # The app's cookies live an hour: a login ended two hours ago can no longer matter.
        gateway = Gateway(flask_app(log, PERMANENT_SESSION_LIFETIME=3600), log=log)

        cookie = signed_cookie({"username": "alice", "login_id": "l1"})

        async def body(client: httpx.AsyncClient) -> int:
            answer = await client.get(
                "/gateway/streams/x/events", headers={**JSON, "cookie": f"session={cookie}"}
            )
            return answer.status_code

        with_clients(gateway, body)
        wait_until(lambda: kept(log) == ["login:1"])
    finally:
        log.close()


def kept(log: EventLog) -> list[str]:
    with log.tables.engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT credential_id FROM {REVOKED_LOGINS} ORDER BY 1"))
        return [row[0] for row in rows]


def test_a_view_that_cannot_be_read_fails_closed(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = EventLog(sqlite_url)
    try:
        record, _ = ApiTokens(log).create("carol")
        view = CredentialView(log, interval=0.02, stale_after=0.3)
        assert view.token_live(record.token_id)  # read, and fresh
        failing = {"on": True}
        select = log.tables.select

        def down(*args: object, **kwargs: object) -> object:
            if failing["on"]:
                raise sa.exc.OperationalError("SELECT", {}, Exception("the database is down"))
            return select(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(log.tables, "select", down)

        def refused() -> bool:
            try:
                view.token_live(record.token_id)
            except DatabaseUnavailable:
                return True
            return False

        wait_until(refused)
        with pytest.raises(DatabaseUnavailable):
            view.login_ended("login:any")
        failing["on"] = False  # back: answers again, by itself
        wait_until(lambda: not refused())
        assert view.token_live(record.token_id)
    finally:
        log.close()


LOGINS = [f"login:{i}" for i in range(6)]
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(["alice", "bob"])),
        st.tuples(st.just("revoke"), st.integers(0, 20)),
        st.tuples(st.just("end"), st.sampled_from(LOGINS)),
        st.tuples(st.just("ask"), st.sampled_from(LOGINS)),
        st.just(("refresh", None)),
    ),
    max_size=25,
)


def test_the_view_agrees_with_the_tables_reading_each_change_once(sqlite_url: str) -> None:
    log, other = EventLog(sqlite_url), EventLog(sqlite_url)
    try:

        @settings(max_examples=40, deadline=None, derandomize=True)
        @given(operations=OPERATIONS)
        def check(operations: list[tuple[str, object]]) -> None:
            # Fewer answers kept than logins asked about: some are asked of the database again.
            view = CredentialView(log, logins_remembered=2)
            view.start = lambda: None  # type: ignore[method-assign]  # the test reads, alone
            view.refresh()
            tokens, ended = ApiTokens(other), EndedLogins(other)
            made: list[str] = []
            revoked: set[str] = set()
            changed: set[str] = set()  # the rows written since the last refresh
            with log.tables.engine.connect() as conn:  # the examples share the database
                rows = conn.execute(sa.select(revoked_logins.c.credential_id))
                gone_now = {row.credential_id for row in rows}
            for kind, arg in operations:
                if kind == "create":
                    made.append(tokens.create(str(arg))[0].token_id)
                    changed.add(made[-1])
                elif kind == "revoke" and made:
                    token_id = made[int(arg) % len(made)]  # type: ignore[call-overload]
                    tokens.revoke(token_id)
                    if token_id not in revoked:  # revoking again writes nothing
                        revoked.add(token_id)
                        changed.add(token_id)
                elif kind == "end":
                    ended.end(str(arg), "alice")
                    changed.add(str(arg))
                    gone_now.add(str(arg))
                elif kind == "ask":
                    # Kept in memory, ended or not, until a change or the bound lets it go.
                    assert not view.login_ended(str(arg)) or str(arg) in gone_now
                elif kind == "refresh":
                    # Each row written since the last read, once; nothing else.
                    assert view.refresh() == len(changed)
                    changed.clear()
            view.refresh()
            with log.tables.engine.connect() as conn:
                live = {
                    r.token_id
                    for r in conn.execute(sa.select(api_tokens)).all()
                    if r.revoked_at is None
                }
                gone = {
                    r.credential_id: r.revoked_at for r in conn.execute(sa.select(revoked_logins))
                }
            for token_id in made:
                assert view.token_live(token_id) == (token_id in live)
            for credential, at in gone.items():
                assert view.login_ended(credential) and view.login_ended(credential, at)
                assert not view.login_ended(credential, at + 1)
            for credential in set(LOGINS) - set(gone):
                assert not view.login_ended(credential)
            assert view.logins_held <= 2

        check()
    finally:
        log.close()
        other.close()
