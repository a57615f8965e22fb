"""Bearer API tokens and host-login tokens: made by the command line, stored hashed, revoked."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from gateway_kit import EventLog
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tables import api_tokens
from gateway_kit.identity.tokens import LIVE_BATCH, ApiTokens, TokenKind
from tests.support.flask_site import assert_error, strict_gateway, with_clients
from tests.support.waiting import answered_while_another_writes, wait_until

JSON = {"accept": "application/json"}
PAGE = "/gateway/streams/carol-work/events"
GATEWAY_KIT = Path(sys.executable).parent / "gateway-kit"


@pytest.fixture
def log(log_url: str) -> Iterator[EventLog]:
    event_log = EventLog(log_url)
    event_log.append("carol-work", "Message", {"text": "for carol"})
    StreamOwners(event_log).declare("carol-work", "carol")
    try:
        yield event_log
    finally:
        event_log.close()


def bearer(token: str) -> dict[str, str]:
    return {**JSON, "authorization": f"Bearer {token}"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GATEWAY_KIT), "tokens", *args], capture_output=True, text=True, timeout=60
    )


def test_a_token_made_by_the_cli_reads_its_users_streams_until_revoked(
    log: EventLog, log_url: str
) -> None:
    made = cli("create", "carol", "--scope", "read", "--db", log_url)
    assert made.returncode == 0, made.stderr
    fields = dict(line.split(":", 1) for line in made.stdout.splitlines() if ":" in line)
    token, token_id = fields["token"].strip(), fields["token id"].split()[0]
    with log.tables.engine.connect() as conn:
        stored = conn.execute(sa.select(api_tokens)).one()
    assert token not in repr(tuple(stored)) and token.split("_")[-1] not in repr(tuple(stored))
    gateway = strict_gateway(log)

    async def read(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get(PAGE, headers=bearer(token))

    listed = cli("list", "--db", log_url)
    assert listed.returncode == 0, listed.stderr
    assert token_id in listed.stdout and "carol" in listed.stdout and "read" in listed.stdout
    assert token.split("_")[-1] not in listed.stdout  # never the secret
    answer = with_clients(gateway, read)
    assert answer.status_code == 200 and answer.json()["events"][0]["data"] == {"text": "for carol"}
    assert cli("revoke", token_id, "--db", log_url).returncode == 0
    # Each process reads revocations every half second.
    wait_until(lambda: with_clients(gateway, read).status_code == 401, timeout=2.0)
    assert_error(with_clients(gateway, read), 401, "unauthenticated")
    unknown = cli("revoke", "000000000000", "--db", log_url)
    assert unknown.returncode == 1 and "no token" in unknown.stderr


def test_a_token_carries_its_user_and_scopes_to_the_principal(log: EventLog) -> None:
    _record, token = ApiTokens(log).create("carol", scopes=["read", "admin:x"])
    gateway = strict_gateway(log)
    found = ApiTokens(log).check(token, TokenKind.API)
    assert found is not None and found.scopes == frozenset({"read", "admin:x"})
    assert (
        ApiTokens(log).check(token[:-1] + ("A" if token[-1] != "A" else "B"), TokenKind.API) is None
    )
    assert ApiTokens(log).check(token, TokenKind.HOST) is None  # an API token is not a host one

    async def body(client: httpx.AsyncClient) -> None:
        _other, other_token = ApiTokens(log).create("dave")
        assert (await client.get(PAGE, headers=bearer(token))).status_code == 200
        assert_error(await client.get(PAGE, headers=bearer(other_token)), 403, "forbidden")

    with_clients(gateway, body)


@pytest.mark.parametrize("scope", ["", "has space", "x" * 65, "ünïcode"])
def test_a_scope_that_cannot_be_stored_is_refused_and_nothing_is_written(
    log: EventLog, log_url: str, scope: str
) -> None:
    made = cli("create", "carol", "--scope", scope, "--db", log_url)
    assert made.returncode == 2 and "scope" in made.stderr
    assert ApiTokens(log).list() == []


def test_live_names_the_tokens_that_hold_of_those_asked_about(log: EventLog) -> None:
    tokens = ApiTokens(log)
    kept, _ = tokens.create("carol")
    revoked, _ = tokens.create("carol")
    tokens.revoke(revoked.token_id)
    asked = [kept.token_id, revoked.token_id, "f" * len(kept.token_id), kept.token_id]
    assert tokens.live(asked) == {kept.token_id}
    assert tokens.live([]) == set()


def test_live_answers_for_more_tokens_than_one_query_holds(log: EventLog) -> None:
    tokens = ApiTokens(log)
    made = [tokens.create(f"user-{n % 7}")[0].token_id for n in range(LIVE_BATCH + 45)]
    revoked = set(made[::3])
    for token_id in revoked:
        tokens.revoke(token_id)
    unknown = [f"{n:012x}" for n in range(20)]
    assert tokens.live(made + unknown) == set(made) - revoked
    for count in (1, 2, 3, 5, 17):  # batches padded to a size compiled once
        assert tokens.live(made[:count] + unknown[:2]) == set(made[:count]) - revoked


def test_live_does_not_wait_for_a_writer(sqlite_url: str) -> None:
    log = EventLog(sqlite_url)
    try:
        tokens = ApiTokens(log)
        kept, _ = tokens.create("carol")
        answer = answered_while_another_writes(sqlite_url, lambda: tokens.live([kept.token_id]))
        assert answer == {kept.token_id}
    finally:
        log.close()


def test_a_host_login_token_is_accepted_only_from_this_host_without_a_proxy(log: EventLog) -> None:
    _, token = ApiTokens(log).create("carol", kind=TokenKind.HOST)
    gateway = strict_gateway(log)

    def read(headers: dict[str, str], client_addr: tuple[str, int]) -> httpx.Response:
        async def body(client: httpx.AsyncClient) -> httpx.Response:
            return await client.get(f"http://localhost:8000{PAGE}", headers=headers)

        return with_clients(gateway, body, client_addr=client_addr)

    assert read(bearer(token), ("127.0.0.1", 5000)).status_code == 200
    assert read(bearer(token), ("::1", 5000)).status_code == 200
    refused = [
        read(bearer(token), ("10.1.2.3", 5000)),  # another machine
        read({**bearer(token), "x-forwarded-for": "203.0.113.9"}, ("127.0.0.1", 5000)),
        read({**bearer(token), "forwarded": "for=203.0.113.9"}, ("127.0.0.1", 5000)),
        read({**bearer(token), "host": "gateway.example.com"}, ("127.0.0.1", 5000)),
    ]
    for answer in refused:
        assert_error(answer, 401, "unauthenticated")
    # And as a plain Bearer token it is refused everywhere: the two kinds never stand in.
    _api_record, api_token = ApiTokens(log).create("carol")
    assert ApiTokens(log).check(api_token, TokenKind.HOST) is None


@pytest.mark.parametrize(
    "forwarding",
    [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-port", "443"),
        ("x-forwarded-server", "proxy.example.com"),
        ("X-Real-IP", "203.0.113.9"),
        ("x-forwarded", "for=203.0.113.9"),
        ("via", "1.1 proxy"),
    ],
)
def test_a_host_login_token_is_refused_behind_any_forwarding_header(
    log: EventLog, forwarding: tuple[str, str]
) -> None:
    _, token = ApiTokens(log).create("carol", kind=TokenKind.HOST)
    gateway = strict_gateway(log)
    name, value = forwarding

    async def body(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        url = f"http://localhost:8000{PAGE}"
        direct = await client.get(url, headers=bearer(token))
        proxied = await client.get(url, headers={**bearer(token), name: value})
        return direct, proxied

    direct, proxied = with_clients(gateway, body, client_addr=("127.0.0.1", 5000))
    assert direct.status_code == 200
    assert_error(proxied, 401, "unauthenticated")
