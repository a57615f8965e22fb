"""PostgreSQL crashes under a pending approval: a decision meanwhile is a 503 that decides
nothing; once the server is back the same decision is taken, and reaches goose once."""

from __future__ import annotations

import asyncio

from gateway_kit import GatewaySettings
from gateway_kit.approvals import ApprovalSettings
from gateway_kit.testing import FakeGoose
from tests.support.approvals import (
    confirmations,
    decide,
    in_loop,
    pending_approval,
    start_asking_run,
)
from tests.support.postgres import PgServer
from tests.support.runs import gateway_client, wait_status
from tests.support.waiting import until

QUICK = ApprovalSettings(sweep_interval=0.05, redeliver_after=0.2)


@in_loop
async def test_a_decision_during_an_outage_is_a_503_and_is_taken_after_it(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    fake = FakeGoose()
    async with gateway_client(
        throwaway_pg_url, fake, settings=GatewaySettings(approvals=QUICK)
    ) as (
        client,
        gateway,
        _,
    ):
        run_id, _ = await start_asking_run(client, fake, gateway)
        approval = await pending_approval(client)
        await asyncio.to_thread(throwaway_pg.kill)
        during = await decide(client, approval)
        assert during.status_code == 503, during.text
        assert during.json()["error"] == "database_unavailable"
        await asyncio.to_thread(throwaway_pg.start)

        async def taken() -> bool:
            answer = await decide(client, approval)
            assert answer.status_code in (200, 503), answer.text
            return answer.status_code == 200

        await until(taken, 30, interval=0.2, failure=lambda: "the decision was never taken")
        await wait_status(client, run_id, "finished")
        assert confirmations(fake) == [("call_approve_1", "allow_once")]
        assert gateway.approvals is not None
        actions = [e.action for e in gateway.approvals.store.audit_of(approval["approval_id"])]
        assert actions.count("decided") == 1
        assert "delivered" in actions
