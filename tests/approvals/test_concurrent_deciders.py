"""Twenty people decide one approval at once, through two gateway processes' worth of
connections to one PostgreSQL: one decision is taken, nineteen are told whose it was."""

from __future__ import annotations

import asyncio

import httpx

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream
from gateway_kit.testing import FakeGoose
from tests.support.approvals import (
    confirmations,
    decide,
    in_loop,
    pending_approval,
    start_asking_run,
)
from tests.support.runs import gateway_client, wait_status
from tests.support.upstream import FAST, GOOSE_URL

DECIDERS = 20


@in_loop
async def test_twenty_concurrent_deciders_one_wins_nineteen_are_told_who(pg_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(pg_url, fake) as (client, gateway, _):
        # A second gateway on the same database: its own connections, its own writer.
        other_log = EventLog(pg_url)
        other_goose = httpx.AsyncClient()
        other = Gateway(
            log=other_log,
            upstream=GooseUpstream(GOOSE_URL, secret_key=fake.secret_key, client=other_goose),
            allow_anonymous=True,
            settings=GatewaySettings(pumps=FAST),
            load_entry_points=False,
        )
        transport = httpx.ASGITransport(app=other)
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://gateway.test"
            ) as other_client:
                run_id, _ = await start_asking_run(client, fake, gateway)
                approval = await pending_approval(client)
                clients = [client, other_client] * (DECIDERS // 2)
                decisions = ["approve", "reject"] * (DECIDERS // 2)
                answers = await asyncio.gather(
                    *(
                        decide(each, approval, decision, reason=f"decider {n}")
                        for n, (each, decision) in enumerate(zip(clients, decisions, strict=True))
                    )
                )
                await wait_status(client, run_id, "finished")
        finally:
            assert other.runs is not None
            await other.runs.shutdown()
            await other_goose.aclose()
            other_log.close()

        statuses = sorted(answer.status_code for answer in answers)
        assert statuses == [200] + [409] * (DECIDERS - 1)
        won = next(answer.json()["approval"] for answer in answers if answer.status_code == 200)
        for answer in answers:
            if answer.status_code == 409:
                body = answer.json()
                assert body["error"] == "approval_closed"
                assert body["approval"]["decision"] == won["decision"]
                assert body["approval"]["decided_at"] == won["decided_at"]
                assert "anonymous" in body["message"]
        assert gateway.approvals is not None
        entries = gateway.approvals.store.audit_of(approval["approval_id"])
        tried = [e for e in entries if e.action in ("decided", "decision_refused")]
        assert len(tried) == DECIDERS
        assert [e.action for e in tried].count("decided") == 1
        # the winner's reason is on record, and each refused decider is told who decided first
        assert {e.detail.get("reason") for e in entries if e.action == "decided"} == {won["reason"]}
        refused = [e for e in tried if e.action == "decision_refused"]
        assert all("anonymous" in e.detail["why"] and e.principal == "anonymous" for e in refused)
        assert {e.detail["decision"] for e in refused} == {"approve", "reject"}
        action = "allow_once" if won["decision"] == "approve" else "deny_once"
        assert confirmations(fake) == [("call_approve_1", action)]
