"""The legacy shapes of tool approvals: the messages made of approval events, and the legacy
pending list ``GET /api/plan-approvals/pending``, answered from the gateway's approvals."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from gateway_kit import EventLog, Gateway, GooseUpstream, LegacySurfaces, hookimpl
from gateway_kit.approvals import Approval, ApprovalService, Kind, Status
from gateway_kit.approvals.events import EVENT_TYPES
from gateway_kit.approvals.goose_actions import ActionRequest
from gateway_kit.approvals.legacy import (
    TOOL_APPROVAL_REQUIRED,
    TOOL_APPROVAL_RESOLVED,
    legacy_events,
    pending_item,
    required_message,
    resolved_message,
)
from gateway_kit.approvals.routes import ApprovalRoutes
from gateway_kit.approvals.store import MOST_PENDING
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.principal import Principal
from gateway_kit.testing import FakeGoose

PATH = "/api/plan-approvals/pending"
SHELL = ActionRequest(Kind.TOOL_CONFIRMATION, "call_1", "shell", {"command": "ls"}, "Run it?")
QUESTION = ActionRequest(Kind.ELICITATION, "ask_1", None, {"message": "Which?"}, "Which?")
ITEM_KEYS = {
    "id", "approval_id", "conversation_id", "username", "tool_name", "arguments", "prompt",
    "status", "created_at", "expires_at", "claimed_by",
}  # fmt: skip


def an_approval(**changes: Any) -> Approval:
    approval = Approval(
        approval_id="apr_" + "a" * 32,
        kind=Kind.TOOL_CONFIRMATION,
        stream="conv",
        run_id="run-1",
        session_id="s1",
        lifetime=0,
        request_id="call_1",
        tool_name="shell",
        arguments={"command": "ls"},
        args_hash="b" * 64,
        prompt=None,
        status=Status.PENDING,
        requested_at=100.0,
        expires_at=1000.0,
    )
    return dataclasses.replace(approval, **changes)


def envelope(event_type: str, approval: Approval) -> dict[str, Any]:
    return {"seq": 7, "stream": approval.stream, "type": event_type, "data": approval.as_json()}


# --- the messages


def test_an_approval_asked_for_is_tool_approval_required() -> None:
    approval = an_approval(prompt="Run it?")
    assert legacy_events(envelope("approval_requested", approval)) == [
        (
            TOOL_APPROVAL_REQUIRED,
            {
                "approval_id": approval.approval_id,
                "id": approval.approval_id,
                "conversation_id": "conv",
                "tool_name": "shell",
                "arguments": {"command": "ls"},
                "prompt": "Run it?",
                "args_hash": "b" * 64,
                "expires_at": 1000.0,
            },
        )
    ]


@pytest.mark.parametrize(
    ("event_type", "changes", "expected"),
    [
        (
            "approval_decided",
            {"status": Status.APPROVED, "decided_by": "alice", "reason": "looks fine"},
            (True, "approved", "alice", "looks fine"),
        ),
        (
            "approval_decided",
            {"status": Status.REJECTED, "decided_by": "bob"},
            (False, "rejected", "bob", None),
        ),
        (
            "approval_expired",
            {"status": Status.EXPIRED, "closed_reason": "nobody decided in time"},
            (False, "expired", None, "nobody decided in time"),
        ),
        (
            "approval_voided",
            {"status": Status.VOIDED, "closed_reason": "the run ended before anybody decided"},
            (False, "voided", None, "the run ended before anybody decided"),
        ),
    ],
)
def test_an_approval_closed_is_tool_approval_resolved(
    event_type: str, changes: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    approval = an_approval(**changes)
    approved, status, decided_by, reason = expected
    assert legacy_events(envelope(event_type, approval)) == [
        (
            TOOL_APPROVAL_RESOLVED,
            {
                "approval_id": approval.approval_id,
                "id": approval.approval_id,
                "conversation_id": "conv",
                "approved": approved,
                "status": status,
                "decided_by": decided_by,
                "reason": reason,
            },
        )
    ]


def test_arguments_left_out_of_the_event_are_said_to_be_left_out() -> None:
    data = {**an_approval().as_json(), "arguments": None, "arguments_omitted": "too large"}
    (required,) = legacy_events({"type": "approval_requested", "data": data})
    assert required[1]["arguments"] is None
    assert required[1]["arguments_omitted"] == "too large"


def test_only_tool_approvals_asked_for_or_closed_make_legacy_messages() -> None:
    approval = an_approval()
    question = an_approval(kind=Kind.ELICITATION, tool_name=None)
    assert legacy_events(envelope("approval_claimed", approval)) == []
    for event_type in EVENT_TYPES:
        assert legacy_events(envelope(event_type, question)) == []
    assert legacy_events({"type": "Message", "data": {"text": "hi"}}) == []


@pytest.mark.parametrize(
    "data",
    [None, [], "approval", 7, {}, {"kind": "tool_confirmation"}, {"approval_id": 1}],
)
def test_an_approval_event_whose_data_is_not_an_approval_makes_nothing(data: Any) -> None:
    # Anyone who may append to the log may write an event of these types.
    for event_type in EVENT_TYPES:
        assert legacy_events({"type": event_type, "data": data}) == []
    assert required_message(data) is None and resolved_message(data) is None


def test_the_pending_item_has_the_legacy_keys() -> None:
    item = pending_item(an_approval(claimed_by="bob"), "alice")
    assert set(item) == ITEM_KEYS
    assert (item["id"], item["username"], item["claimed_by"]) == ("apr_" + "a" * 32, "alice", "bob")
    assert (item["created_at"], item["expires_at"], item["status"]) == (100.0, 1000.0, "pending")


# --- the pending list


@asynccontextmanager
async def gateway(
    log: EventLog, *, with_upstream: bool = True, **options: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Gateway]]:
    fake = FakeGoose()
    upstream = GooseUpstream(secret_key=fake.secret_key, client=fake.client())
    served = Gateway(
        log=log,
        upstream=upstream if with_upstream else None,
        load_entry_points=False,
        **{"legacy": LegacySurfaces(approvals=PATH), **options},
    )
    transport = httpx.ASGITransport(app=served)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        yield client, served


async def ask(service: ApprovalService | None, stream: str, asked: ActionRequest = SHELL) -> str:
    assert service is not None
    approval, _ = await service.request(
        asked, stream=stream, run_id=None, session_id=f"session-of-{stream}", lifetime=0
    )
    return approval.approval_id


def bearer(log: EventLog, user: str) -> dict[str, str]:
    _, token = ApiTokens(log).create(user)
    return {"authorization": f"Bearer {token}"}


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


def test_each_user_gets_the_pending_tool_approvals_of_the_streams_they_may_read(
    log: EventLog,
) -> None:
    owners = StreamOwners(log)
    owners.declare("alice-1", "alice")
    owners.declare("alice-2", "alice")
    owners.declare("bob-1", "bob")
    alice, bob = bearer(log, "alice"), bearer(log, "bob")

    async def main() -> None:
        async with gateway(log) as (client, served):
            first = await ask(served.approvals, "alice-1")
            second = await ask(served.approvals, "alice-2")
            await ask(served.approvals, "bob-1")
            await ask(served.approvals, "alice-1", QUESTION)  # no legacy shape: left out
            decided = await ask(
                served.approvals, "alice-2", dataclasses.replace(SHELL, request_id="call_2")
            )
            assert served.approvals is not None
            approval = await served.approvals.get(decided)
            await served.approvals.decide(
                decided, Principal("alice", "bearer"), decision="reject",
                args_hash=approval.args_hash,
            )  # fmt: skip
            mine = (await client.get(PATH, headers=alice)).json()
            one = await client.get(PATH, params={"conversation_id": "alice-2"}, headers=alice)
            empty = await client.get(PATH, params={"conversation_id": ""}, headers=alice)
            theirs = await client.get(PATH, params={"conversation_id": "bob-1"}, headers=alice)
            bobs = (await client.get(PATH, headers=bob)).json()

        assert mine["success"] is True
        assert [a["id"] for a in mine["approvals"]] == [first, second]  # oldest first
        assert {a["username"] for a in mine["approvals"]} == {"alice"}
        assert all(set(a) == ITEM_KEYS and a["status"] == "pending" for a in mine["approvals"])
        assert [a["id"] for a in one.json()["approvals"]] == [second]
        assert empty.json() == mine  # an empty conversation_id filters nothing
        assert theirs.status_code == 200 and theirs.json() == {"success": True, "approvals": []}
        assert [(a["conversation_id"], a["username"]) for a in bobs["approvals"]] == [
            ("bob-1", "bob")
        ]

    run(main)


def test_anonymous_where_allowed_reads_every_stream_and_is_the_username_of_unowned_ones(
    log: EventLog,
) -> None:
    StreamOwners(log).declare("owned", "alice")

    async def main() -> None:
        async with gateway(log, allow_anonymous=True) as (client, served):
            await ask(served.approvals, "owned")
            await ask(served.approvals, "unowned")
            listed = (await client.get(PATH)).json()["approvals"]
        assert [(a["conversation_id"], a["username"]) for a in listed] == [
            ("owned", "alice"),
            ("unowned", "anonymous"),
        ]

    run(main)


async def ask_many(service: ApprovalService | None, streams: list[str], count: int) -> list[str]:
    """`count` pending tool approvals, asked one after the other, spread over `streams`."""
    return [
        await ask(
            service, streams[i % len(streams)], dataclasses.replace(SHELL, request_id=f"call_{i}")
        )
        for i in range(count)
    ]


def test_others_pending_approvals_never_push_a_users_own_out_of_the_list(log: EventLog) -> None:
    owners = StreamOwners(log)
    bobs = [f"bob-{i}" for i in range(3)]
    for stream in bobs:
        owners.declare(stream, "bob")
    owners.declare("alice-1", "alice")
    alice, bob = bearer(log, "alice"), bearer(log, "bob")
    more_than_a_list = MOST_PENDING + 10

    async def main() -> None:
        async with gateway(log) as (client, served):
            his = await ask_many(served.approvals, bobs, more_than_a_list)  # older than hers
            hers = await ask(served.approvals, "alice-1")
            mine = (await client.get(PATH, headers=alice)).json()["approvals"]
            theirs = (await client.get(PATH, headers=bob)).json()["approvals"]
        assert [a["id"] for a in mine] == [hers]
        assert [a["id"] for a in theirs] == his[:MOST_PENDING]  # his oldest, as many as fit

    run(main)


class SharesBobsStreams:
    """A deployment's rule: carol may read bob's streams too."""

    @hookimpl
    def authorize_subscription(self, principal: Principal, stream: str) -> bool | None:
        if principal.user_id == "carol" and stream.startswith("bob-"):
            return True
        return None


def test_streams_a_plugin_shares_are_listed_without_pushing_the_readers_own_out(
    log: EventLog,
) -> None:
    owners = StreamOwners(log)
    bobs = [f"bob-{i}" for i in range(3)]
    for stream in bobs:
        owners.declare(stream, "bob")
    owners.declare("carol-1", "carol")
    owners.declare("dave-1", "dave")
    carol = bearer(log, "carol")

    async def main() -> None:
        async with gateway(log, plugins=(SharesBobsStreams(),)) as (client, served):
            his = await ask_many(served.approvals, bobs, MOST_PENDING + 10)
            await ask(served.approvals, "dave-1")  # nobody shares dave's
            hers = await ask(served.approvals, "carol-1")
            listed = (await client.get(PATH, headers=carol)).json()["approvals"]
        # Her own, and bob's oldest as many as still fit, oldest first: never dave's.
        assert [a["id"] for a in listed] == [*his[: MOST_PENDING - 1], hers]
        assert {a["username"] for a in listed} == {"bob", "carol"}

    run(main)


def test_no_principal_is_a_401_and_a_name_no_stream_can_have_a_400(log: EventLog) -> None:
    alice = bearer(log, "alice")

    async def main() -> None:
        async with gateway(log) as (client, _):
            nobody = await client.get(PATH)
            too_long = await client.get(PATH, params={"conversation_id": "c" * 201}, headers=alice)
            nul = await client.get(PATH + "?conversation_id=a%00b", headers=alice)
            posted = await client.post(PATH, headers=alice)
        assert nobody.status_code == 401 and nobody.json()["error"] == "unauthenticated"
        for refused in (too_long, nul):
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"] == "invalid_stream"
        assert posted.status_code == 405 and posted.headers["allow"] == "GET"

    run(main)


def test_arguments_that_are_not_valid_unicode_are_listed_escaped(log: EventLog) -> None:
    StreamOwners(log).declare("conv", "alice")
    alice = bearer(log, "alice")
    odd = dataclasses.replace(SHELL, arguments={"command": "ls \udc80"})

    async def main() -> None:
        async with gateway(log) as (client, served):
            await ask(served.approvals, "conv", odd)
            answer = await client.get(PATH, headers=alice)
        assert answer.status_code == 200, answer.text
        assert answer.content.isascii()
        (item,) = answer.json()["approvals"]
        assert item["arguments"] == {"command": "ls \udc80"}  # as goose sent them

    run(main)


def test_without_an_upstream_the_list_is_empty(log: EventLog) -> None:
    async def main() -> None:
        async with gateway(log, with_upstream=False, allow_anonymous=True) as (client, _):
            answer = await client.get(PATH)
        assert answer.json() == {"success": True, "approvals": []}

    run(main)


async def app_answer(scope: Any, receive: Any, send: Any) -> None:
    body = b'{"from": "the app"}'
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def test_unless_switched_on_the_app_answers_its_own_list(log: EventLog) -> None:
    async def main() -> None:
        async with gateway(log, allow_anonymous=True, legacy=None) as (client, _):
            assert (await client.get(PATH)).status_code == 404  # no app: the gateway's 404
        served = Gateway(app_answer, log=log, allow_anonymous=True)
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            assert (await client.get(PATH)).json() == {"from": "the app"}

    run(main)


def test_the_part_alone_needs_a_principal_and_passes_every_other_request_on() -> None:
    part = ApprovalRoutes(
        app_answer,
        approvals=None,
        plugins=None,  # type: ignore[arg-type]
        legacy_path=PATH,
    )

    async def main() -> None:
        transport = httpx.ASGITransport(app=part)
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            refused = await client.get(PATH)  # no identity stage in front: nobody is asking
            other = await client.get(PATH + "/x")
        assert refused.status_code == 401
        assert other.json() == {"from": "the app"}

    run(main)
