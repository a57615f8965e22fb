"""Socket tickets: many per user, single use under races, hashed, capped, rate-limited."""

from __future__ import annotations

import threading

import httpx
import pytest
import sqlalchemy as sa

from gateway_kit import (
    EventLog,
    Gateway,
    GatewaySettings,
    IdentitySettings,
    LegacySurfaces,
    Principal,
)
from gateway_kit.identity.tables import socket_tickets
from gateway_kit.identity.tickets import RateLimited, SocketTickets
from gateway_kit.identity.tokens import ApiTokens
from tests.support.flask_site import assert_error, flask_app, log_in, with_clients

ALICE = Principal(user_id="alice", method="bearer", credential_id="tok-1")


def test_issuing_never_revokes_the_users_other_tickets(log: EventLog) -> None:
    tickets = SocketTickets(log)
    issued = [tickets.issue(ALICE)[0] for _ in range(5)]
    holders = [tickets.consume(t) for t in issued]
    assert all(h is not None and h.principal.user_id == "alice" for h in holders)
    assert all(tickets.consume(t) is None for t in issued)  # each once


def test_a_ticket_is_consumed_once_whoever_races_for_it(log: EventLog) -> None:
    tickets = SocketTickets(log)
    ticket, _ = tickets.issue(ALICE)
    start = threading.Barrier(8)
    won: list[object] = []

    def consume() -> None:
        start.wait()
        holder = tickets.consume(ticket)
        if holder is not None:
            won.append(holder)

    threads = [threading.Thread(target=consume) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1


def test_tickets_are_stored_hashed_and_the_per_user_cap_evicts_the_oldest(log: EventLog) -> None:
    tickets = SocketTickets(log, per_user=3)
    issued = [tickets.issue(ALICE)[0] for _ in range(4)]
    with log.tables.engine.connect() as conn:
        stored = repr(conn.execute(sa.select(socket_tickets)).all())
    assert not any(t in stored for t in issued)
    assert tickets.consume(issued[0]) is None  # the oldest went
    assert all(tickets.consume(t) is not None for t in issued[1:])


def test_the_rate_counts_tickets_long_expired_within_a_long_window(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr("gateway_kit.identity.tickets.time.time", lambda: clock[0])
    tickets = SocketTickets(log, ttl=1, rate=2, rate_window=3600)
    tickets.issue(ALICE)
    tickets.issue(ALICE)
    clock[0] += 120  # both expired a minute ago and more: still two within the hour
    with pytest.raises(RateLimited) as refused:
        tickets.issue(ALICE)
    assert refused.value.retry_after == pytest.approx(3600 - 120)


@pytest.mark.parametrize(
    "setting", [{"ttl": 0}, {"per_user": 0}, {"rate": -1}, {"rate_window": "x"}]
)
def test_settings_that_cannot_work_are_refused(log: EventLog, setting: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SocketTickets(log, **setting)  # type: ignore[arg-type]


def test_asking_too_often_is_a_429_with_retry_after_and_the_legacy_shape_is_kept(
    sqlite_url: str,
) -> None:
    log = EventLog(sqlite_url)
    _, token = ApiTokens(log).create("alice")
    gateway = Gateway(
        flask_app(log),
        log=log,
        settings=GatewaySettings(identity=IdentitySettings(ticket_rate=(2, 60.0))),
        legacy=LegacySurfaces(socket_token="/api/socket-token"),
    )
    bearer = {"authorization": f"Bearer {token}"}

    async def body(client: httpx.AsyncClient) -> None:
        first = await client.post("/gateway/socket-tickets", headers=bearer)
        assert first.status_code == 200 and set(first.json()) == {"ticket", "expires_in"}
        legacy = await client.get("/api/socket-token", headers=bearer)
        assert legacy.status_code == 200
        assert legacy.json()["success"] is True and legacy.json()["expires_in"] == 30
        assert legacy.json()["token"] != first.json()["ticket"]
        limited = await client.post("/gateway/socket-tickets", headers=bearer)
        assert_error(limited, 429, "rate_limited")
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert_error(await client.post("/gateway/socket-tickets"), 401, "unauthenticated")

    with_clients(gateway, body)
    log.close()


def test_the_legacy_socket_token_needs_a_cookies_csrf_token(sqlite_url: str) -> None:
    log = EventLog(sqlite_url)
    gateway = Gateway(
        flask_app(log), log=log, legacy=LegacySurfaces(socket_token="/api/socket-token")
    )

    async def body(client: httpx.AsyncClient) -> None:
        csrf = await log_in(client, "alice")
        before = _tickets(log)
        # A request another site can make a logged-in browser send: no ticket, nothing written.
        for refused in (
            await client.get("/api/socket-token"),
            await client.get("/api/socket-token", headers={"x-csrf-token": "not-the-token"}),
            await client.get("/api/socket-token", params={"csrf_token": csrf[:-1]}),
        ):
            assert_error(refused, 403, "csrf_failed")
        assert _tickets(log) == before
        # What the legacy page can send: the header, or a query parameter.
        by_header = await client.get("/api/socket-token", headers={"x-csrf-token": csrf})
        by_param = await client.get("/api/socket-token", params={"csrf_token": csrf})
        for answer in (by_header, by_param):
            assert answer.status_code == 200, answer.text
            assert answer.json()["success"] is True and answer.json()["token"]

    with_clients(gateway, body)
    log.close()


def _tickets(log: EventLog) -> int:
    with log.tables.engine.connect() as conn:
        return len(conn.execute(sa.select(socket_tickets)).all())


@pytest.mark.parametrize("route", [None, "/auth/csrf"])
def test_a_csrf_refusal_names_only_the_apps_own_token_route(
    sqlite_url: str, route: str | None
) -> None:
    log = EventLog(sqlite_url)
    surfaces = LegacySurfaces(socket_token="/api/socket-token", csrf_token_route=route)
    gateway = Gateway(flask_app(log), log=log, legacy=surfaces)

    async def body(client: httpx.AsyncClient) -> None:
        await log_in(client, "alice")
        for refused in (
            await client.get("/api/socket-token"),
            await client.post("/gateway/socket-tickets"),
        ):
            assert_error(refused, 403, "csrf_failed")
            message = refused.json()["message"]
            assert "/api/csrf-token" not in message  # another app's route, never named
            assert (f"GET {route} gives it" in message) is (route is not None)

    with_clients(gateway, body)
    log.close()
