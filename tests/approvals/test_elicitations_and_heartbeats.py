"""Elicitations are approvals answered with the reply goose expects; a pending approval keeps
heartbeats away from its tmux session."""

from __future__ import annotations

import json

from gateway_kit import GatewaySettings
from gateway_kit.approvals import ApprovalSettings
from gateway_kit.testing import FakeGoose, Turn
from tests.support.approvals import (
    asking_turn,
    decide,
    in_loop,
    listed,
    pending_approval,
    start_asking_run,
)
from tests.support.runs import bound_session, gateway_client, wait_status
from tests.support.waiting import until

QUICK = ApprovalSettings(sweep_interval=0.05, redeliver_after=0.2)
SCHEMA = {"type": "object", "properties": {"colour": {"type": "string"}}}


def elicitation_turn() -> Turn:
    return Turn().elicit("Which colour?", SCHEMA).text("painting now")


def answers(fake: FakeGoose, session_id: str) -> list[dict[str, object]]:
    """The elicitation responses goose was sent, as its replies carried them."""
    found = []
    for call in fake.reply_calls:
        if call.session_id != session_id:
            continue
        for item in call.user_message.get("content", []):
            if item.get("type") == "actionRequired":
                found.append(item["data"])
    return found


@in_loop
async def test_an_elicitation_is_answered_by_the_reply_goose_expects(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        run_id, session_id = await start_asking_run(client, fake, gateway, elicitation_turn())
        approval = await pending_approval(client)
        assert approval["kind"] == "elicitation"
        assert approval["arguments"] == {"message": "Which colour?", "requested_schema": SCHEMA}
        # goose gives up after 300 s: an elicitation never waits longer here either
        assert approval["expires_at"] - approval["requested_at"] <= 300
        answer = await decide(client, approval, response={"colour": "blue"})
        assert answer.status_code == 200, answer.text
        await wait_status(client, run_id, "finished")
        sent = answers(fake, session_id)
        assert sent == [
            {
                "actionType": "elicitationResponse",
                "id": approval["request_id"],
                "user_data": {"colour": "blue"},
                "action": "accept",
            }
        ]
        history = json.dumps(fake.conversation(session_id))
        assert 'Thanks: {\\"colour\\": \\"blue\\"}' in history
        final = [a for a in await listed(client) if a["approval_id"] == approval["approval_id"]]
        assert final[0]["delivered_at"] is not None


@in_loop
async def test_a_rejected_elicitation_is_declined(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        run_id, session_id = await start_asking_run(client, fake, gateway, elicitation_turn())
        approval = await pending_approval(client)
        assert (await decide(client, approval, "reject")).status_code == 200
        await wait_status(client, run_id, "finished")
        assert [a["action"] for a in answers(fake, session_id)] == ["decline"]
        assert "the user chose to decline" in json.dumps(fake.conversation(session_id))


@in_loop
async def test_a_pending_approval_keeps_heartbeats_away(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake, settings=GatewaySettings(approvals=QUICK)) as (
        client,
        gateway,
        _,
    ):
        bound_session(fake, gateway, asking_turn())
        started = await client.post(
            "/gateway/streams/conv/runs", json={"message": "go", "tmux_session": "work"}
        )
        assert started.status_code == 200, started.text
        approval = await pending_approval(client)

        async def skipped_for_the_approval() -> bool:
            answer = (await client.get("/gateway/heartbeat/work")).json()
            return bool(answer["reason"] == "approval_pending")

        await until(skipped_for_the_approval, 10, failure=lambda: "no approval_pending skip")
        beat = (await client.get("/gateway/heartbeat/work")).json()
        assert beat["decision"] == "skip"
        assert approval["approval_id"] in beat["detail"]
        assert (await decide(client, approval)).status_code == 200
        await wait_status(client, started.json()["run_id"], "finished")
        assert (await client.get("/gateway/heartbeat/work")).json()["reason"] != "approval_pending"
