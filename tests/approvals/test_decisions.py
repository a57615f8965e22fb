"""Approvals end to end, on SQLite and PostgreSQL: goose asks, everyone sees it, the first
valid decision wins and reaches goose once, until goose shows it arrived."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gateway_kit import Gateway, GatewaySettings
from gateway_kit.approvals import ApprovalSettings
from gateway_kit.approvals.events import EVENT_TYPES
from gateway_kit.approvals.goose_actions import ActionRequest
from gateway_kit.exceptions import UpstreamUnavailable
from gateway_kit.testing import DECLINED_RESPONSE, FakeGoose, Turn
from tests.support.approvals import (
    ARGUMENTS,
    TOOL,
    asking_turn,
    confirmations,
    decide,
    in_loop,
    listed,
    pending_approval,
    start_asking_run,
)
from tests.support.runs import gateway_client, wait_status
from tests.support.waiting import until

QUICK = ApprovalSettings(sweep_interval=0.05, redeliver_after=0.2, max_redeliver_delay=0.4)


def stream_types(gateway: Gateway) -> list[str]:
    return [event.type for event in gateway.log.read(stream="conv", limit=1000, settled=False)]


def audit_actions(gateway: Gateway, approval_id: str) -> list[str]:
    assert gateway.approvals is not None
    return [entry.action for entry in gateway.approvals.store.audit_of(approval_id)]


async def approval_now(gateway: Gateway, approval_id: str) -> dict[str, Any]:
    assert gateway.approvals is not None
    return (await gateway.approvals.get(approval_id)).as_json()


@in_loop
async def test_the_first_decision_reaches_goose_once_and_counts_when_the_tool_answers(
    log_url: str,
) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        run_id, _ = await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        canonical = json.dumps(ARGUMENTS, sort_keys=True, separators=(",", ":"))
        assert approval["tool_name"] == TOOL
        assert approval["arguments"] == ARGUMENTS
        assert approval["args_hash"] == hashlib.sha256(canonical.encode()).hexdigest()
        assert approval["run_id"] == run_id
        assert approval["request_id"] == "call_approve_1"
        assert fake.pending_confirmations(approval["session_id"]) == ["call_approve_1"]

        claimed = await client.post(f"/gateway/approvals/{approval['approval_id']}/claim")
        assert claimed.status_code == 200, claimed.text
        assert claimed.json()["approval"]["claimed_by"] == "anonymous"
        decided = await decide(client, approval, reason="looks right")
        assert decided.status_code == 200, decided.text
        assert decided.json()["approval"]["status"] == "approved"

        await wait_status(client, run_id, "finished")

        async def delivered() -> bool:
            now = await approval_now(gateway, approval["approval_id"])
            return now["delivered_at"] is not None

        await until(delivered, 10, failure=lambda: "the delivery was never noted")
        assert confirmations(fake) == [("call_approve_1", "allow_once")]
        types = stream_types(gateway)
        assert types.count("approval_requested") == 1
        assert types.index("approval_claimed") < types.index("approval_decided")
        assert audit_actions(gateway, approval["approval_id"]) == [
            "requested", "claimed", "decided", "sent", "delivered",
        ]  # fmt: skip
        tool_text = json.dumps(fake.conversation(approval["session_id"]))
        assert "removed" in tool_text  # the tool ran: its result is in goose's history


@in_loop
async def test_a_rejection_is_sent_as_deny_once_and_goose_declines_the_tool(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        run_id, session_id = await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        answer = await decide(client, approval, "reject", reason="not today")
        assert answer.status_code == 200, answer.text
        assert answer.json()["approval"]["status"] == "rejected"
        await wait_status(client, run_id, "finished")
        assert confirmations(fake) == [("call_approve_1", "deny_once")]
        assert DECLINED_RESPONSE in json.dumps(fake.conversation(session_id))
        assert "removed" not in json.dumps(fake.conversation(session_id))


@in_loop
async def test_a_later_decision_is_told_who_decided_first(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        assert (await decide(client, approval, "reject")).status_code == 200
        later = await decide(client, approval, "approve")
        assert later.status_code == 409
        body = later.json()
        assert body["error"] == "approval_closed"
        assert "anonymous rejected it at" in body["message"]
        assert body["approval"]["decided_by"] == "anonymous"
        assert body["approval"]["decision"] == "reject"
        claim = await client.post(f"/gateway/approvals/{approval['approval_id']}/claim")
        assert claim.status_code == 409
        actions = audit_actions(gateway, approval["approval_id"])
        assert actions.count("decided") == 1
        assert actions.count("decision_refused") == 1
        assert actions.count("claim_refused") == 1


@in_loop
async def test_a_decision_for_other_arguments_loses_and_changes_nothing(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        stale = {**approval, "args_hash": hashlib.sha256(b'{"command":"ls"}').hexdigest()}
        answer = await decide(client, stale)
        assert answer.status_code == 409
        assert answer.json()["error"] == "arguments_changed"
        assert (await approval_now(gateway, approval["approval_id"]))["status"] == "pending"
        assert confirmations(fake) == []
        assert "approval_decided" not in stream_types(gateway)
        assert audit_actions(gateway, approval["approval_id"]) == ["requested", "decision_refused"]
        assert (await decide(client, approval)).status_code == 200  # the right ones still win


@in_loop
async def test_an_expired_approval_cannot_be_approved_and_goose_is_told_to_deny(
    log_url: str,
) -> None:
    fake = FakeGoose()
    settings = GatewaySettings(approvals=ApprovalSettings(sweep_interval=0.05, redeliver_after=5.0))
    async with gateway_client(log_url, fake, settings=settings, approval_expiry=0.5) as (
        client,
        gateway,
        _,
    ):
        run_id, session_id = await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)

        async def expired() -> bool:
            return (await approval_now(gateway, approval["approval_id"]))["status"] == "expired"

        await until(expired, 10, failure=lambda: "the approval never expired")
        late = await decide(client, approval)
        assert late.status_code == 410
        assert late.json()["error"] == "approval_expired"
        await wait_status(client, run_id, "finished")
        assert confirmations(fake) == [("call_approve_1", "deny_once")]
        assert DECLINED_RESPONSE in json.dumps(fake.conversation(session_id))
        assert "approval_expired" in stream_types(gateway)
        assert "approval_decided" not in stream_types(gateway)


@in_loop
async def test_an_answer_goose_did_not_get_is_sent_again(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        assert gateway.upstream is not None
        real_confirm = gateway.upstream.confirm_tool_action
        failures = [UpstreamUnavailable("goose could not be reached")]

        async def flaky(session_id: str, tool_request_id: str, action: str) -> None:
            if failures:
                raise failures.pop()
            await real_confirm(session_id, tool_request_id, action)

        gateway.upstream.confirm_tool_action = flaky  # type: ignore[method-assign]
        run_id, _ = await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        assert (await decide(client, approval)).status_code == 200
        await wait_status(client, run_id, "finished")
        assert confirmations(fake) == [("call_approve_1", "allow_once")]
        actions = audit_actions(gateway, approval["approval_id"])
        assert actions.count("sent") == 2
        assert actions.count("delivered") == 1


@in_loop
async def test_a_goose_restart_voids_the_pending_approval_and_ends_the_run(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        run_id, _ = await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        fake.restart()
        await wait_status(client, run_id, "failed")
        voided = await approval_now(gateway, approval["approval_id"])
        assert voided["status"] == "voided"
        assert "goose restarted" in voided["closed_reason"]
        errors = [
            e.data for e in gateway.log.read(run_id=run_id, settled=False) if e.type == "Error"
        ]
        assert approval["approval_id"] in errors[-1]["error"]
        assert "approval_voided" in stream_types(gateway)
        late = await decide(client, approval)
        assert late.status_code == 409
        assert confirmations(fake) == []


@in_loop
async def test_a_cancelled_run_voids_its_pending_approval(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        run_id, _ = await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        cancelled = await client.post(f"/gateway/runs/{run_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        await wait_status(client, run_id, "cancelled")

        async def voided() -> bool:
            return (await approval_now(gateway, approval["approval_id"]))["status"] == "voided"

        await until(voided, 10, failure=lambda: "the approval of the ended run stayed pending")
        assert (await decide(client, approval)).status_code == 409
        assert confirmations(fake) == []


@in_loop
async def test_seeing_goose_ask_again_gives_the_same_approval(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        assert gateway.approvals is not None
        stored = await gateway.approvals.get(approval["approval_id"])
        asked = ActionRequest(
            stored.kind, stored.request_id, stored.tool_name, stored.arguments, stored.prompt
        )
        again, new = await gateway.approvals.request(
            asked,
            stream=stored.stream,
            run_id=stored.run_id,
            session_id=stored.session_id,
            lifetime=stored.lifetime,
        )
        assert (again.approval_id, new) == (approval["approval_id"], False)
        assert stream_types(gateway).count("approval_requested") == 1
        assert [a["approval_id"] for a in await listed(client)] == [approval["approval_id"]]


@in_loop
async def test_a_second_turn_asks_again_and_the_list_shows_pending_first(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        run_id, _ = await start_asking_run(
            client, fake, gateway, asking_turn(call_id="call_a"), asking_turn(call_id="call_b")
        )
        first = await pending_approval(client)
        assert (await decide(client, first)).status_code == 200
        await wait_status(client, run_id, "finished")
        again = await client.post("/gateway/streams/conv/runs", json={"message": "more"})
        assert again.status_code == 200, again.text

        async def second_pending() -> bool:
            found = await listed(client)
            return len(found) == 2 and found[0]["status"] == "pending"

        await until(second_pending, 10, failure=lambda: "the second approval never came")
        found = await listed(client)
        assert [a["request_id"] for a in found] == ["call_b", "call_a"]


@in_loop
async def test_claims_and_decisions_name_the_approval_without_writing_its_arguments_again(
    log_url: str,
) -> None:
    fake = FakeGoose()
    content = "large arguments " * 4000  # 64 KB, once in the approval's first event
    asking = Turn().confirm_tool("write_file", {"path": "big.txt", "content": content})
    async with gateway_client(log_url, fake) as (client, gateway, log):
        run_id, _ = await start_asking_run(client, fake, gateway, asking.text("written"))
        approval = await pending_approval(client)
        claims = 20
        for _ in range(claims):
            claimed = await client.post(f"/gateway/approvals/{approval['approval_id']}/claim")
            assert claimed.status_code == 200, claimed.text
            assert claimed.json()["approval"]["arguments"]["content"] == content  # the answer
        assert (await decide(client, approval)).status_code == 200
        await wait_status(client, run_id, "finished")

        events = log.read(stream="conv", limit=1000, settled=False)
        told = [e for e in events if e.type in EVENT_TYPES]
        assert [e.type for e in told] == [
            "approval_requested", *["approval_claimed"] * claims, "approval_decided",
        ]  # fmt: skip
        assert told[0].data["arguments"]["content"] == content  # the first event has them
        for later in told[1:]:
            assert later.data["approval_id"] == approval["approval_id"]
            assert later.data["args_hash"] == approval["args_hash"]
            assert "arguments" not in later.data and "prompt" not in later.data
        # Besides goose's own messages (its call, its question), only the first event has them.
        holding = [e.type for e in events if content in json.dumps(e.data)]
        assert [t for t in holding if t != "Message"] == ["approval_requested"], holding
        assert (await listed(client))[0]["arguments"]["content"] == content  # the list has them
