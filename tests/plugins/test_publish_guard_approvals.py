"""A write a person did not approve is never published by the guard: goose reports a declined
tool call as a success whose text says so, and the gateway's approvals say what became of each
one; a write whose approval was rejected, expired or voided, whose result says it was declined,
or whose approval has no outcome yet is left unwritten, and the run is not passed on its claim."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from gateway_kit import Event, EventLog, GatewaySettings, LifecycleSettings, StreamOwners
from gateway_kit.approvals import Approval, ApprovalSettings, Kind, Status
from gateway_kit.approvals.events import CLAIMED, DECIDED, EXPIRED, REQUESTED, VOIDED, event_of
from gateway_kit.approvals.goose_actions import ActionRequest
from gateway_kit.approvals.rules import new_approval
from gateway_kit.testing import DECLINED_RESPONSE, FakeGoose, Turn
from tests.support.approvals import decide, pending_approval
from tests.support.runs import bound_session, gateway_client, run_types, start_run, wait_status

from .publish import (
    OWNER,
    Typed,
    configured,
    goose_confirmation,
    goose_text,
    goose_tool_call,
    options,
    page,
    public_root,
    run_events,
)

STREAM = "conv"
HTML = page()
WRITE = {"path": "public/fox.html", "content": HTML}
CLAIM = "页面已生成: public/fox.html"
EVENT_OF_STATUS = {
    Status.PENDING: CLAIMED,
    Status.APPROVED: DECIDED,
    Status.REJECTED: DECIDED,
    Status.EXPIRED: EXPIRED,
    Status.VOIDED: VOIDED,
}


# An approval as one of its events will tell of it: (event type, the approval then).
Told = tuple[str, Approval]
Item = dict[str, Any] | Told


def approval_events(call_id: str, arguments: dict[str, Any], *statuses: Status) -> list[Told]:
    """The approval of `call_id` asked for `arguments`, then through each of `statuses`."""
    asked = ActionRequest(Kind.TOOL_CONFIRMATION, call_id, "write_file", arguments, None)
    approval = new_approval(
        asked,
        stream=STREAM,
        run_id=None,
        session_id="session-1",
        lifetime=0,
        now=0.0,
        settings=ApprovalSettings(),
    )
    told: list[Told] = [(REQUESTED, approval)]
    for status in statuses:
        approval = dataclasses.replace(approval, status=status)
        told.append((EVENT_OF_STATUS[status], approval))
    return told


def written(log: EventLog, items: list[Item]) -> list[dict[str, Any] | Typed]:
    """`items` as the log holds them: each approval's event written as the gateway writes it."""
    return [
        (item[0], event_of(log, item[1], item[0])["data"]) if isinstance(item, tuple) else item
        for item in items
    ]


def asked_write(
    call_id: str, *approvals: Told, result: str = "wrote public/fox.html", asked: bool = True
) -> list[Item]:
    """goose's write of the page in approve mode: its request, goose's question, what became of
    the approval, the tool's response, and the answer claiming the page."""
    request, response = goose_tool_call("write_file", WRITE, result=result, call_id=call_id)
    question = [goose_confirmation(call_id, "write_file", WRITE)] if asked else []
    return [request, *question, *approvals, response, goose_text(CLAIM)]


OTHER_ARGUMENTS = {**WRITE, "content": page(title="Something else")}
NOT_APPROVED: dict[str, list[Item]] = {
    "rejected": asked_write("c1", *approval_events("c1", WRITE, Status.REJECTED)),
    "expired": asked_write("c2", *approval_events("c2", WRITE, Status.EXPIRED)),
    "voided": asked_write("c3", *approval_events("c3", WRITE, Status.VOIDED)),
    "still pending": asked_write("c4", *approval_events("c4", WRITE, Status.PENDING)),
    "asked, never recorded": asked_write("c5"),
    "declined by goose": asked_write("c6", result=DECLINED_RESPONSE, asked=False),
    "approved for other arguments": asked_write(
        "c7", *approval_events("c7", OTHER_ARGUMENTS, Status.APPROVED)
    ),
}


@pytest.mark.parametrize("events", list(NOT_APPROVED.values()), ids=list(NOT_APPROVED))
def test_a_write_not_approved_is_never_materialized_and_its_claim_is_vetoed(
    log: EventLog,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    events: list[Item],
) -> None:
    root = public_root(tmp_path)
    StreamOwners(log).declare(STREAM, OWNER)
    guard = configured(log, tmp_path)
    run, stored = run_events(log, STREAM, *written(log, events))
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"):
        veto = guard.finish_guard(run, stored)
    assert not (root / "fox.html").exists()
    assert veto is not None and list(veto.missing) == ["public/fox.html"]
    assert any(
        "fox.html" in r.getMessage() and run.run_id in r.getMessage() for r in caplog.records
    )


def test_a_write_approved_for_its_own_arguments_is_materialized(
    log: EventLog, tmp_path: Path
) -> None:
    root = public_root(tmp_path)
    StreamOwners(log).declare(STREAM, OWNER)
    guard = configured(log, tmp_path)
    approved = asked_write("c8", *approval_events("c8", WRITE, Status.APPROVED))
    run, stored = run_events(log, STREAM, *written(log, approved))
    assert guard.finish_guard(run, stored) is None
    assert (root / "fox.html").read_text() == HTML


def test_the_last_approved_write_of_a_page_is_the_one_materialized(
    log: EventLog, tmp_path: Path
) -> None:
    root = public_root(tmp_path)
    StreamOwners(log).declare(STREAM, OWNER)
    guard = configured(log, tmp_path)
    first = goose_tool_call("write_file", WRITE, call_id="c9")
    rejected = goose_tool_call("write_file", OTHER_ARGUMENTS, result=DECLINED_RESPONSE)
    run, stored = run_events(log, STREAM, *first, *rejected, goose_text(CLAIM))
    assert guard.finish_guard(run, stored) is None
    assert (root / "fox.html").read_text() == HTML  # not the content the user declined


# --- through a gateway, its approvals and the fake goose in approve mode ----------------------

QUICK = ApprovalSettings(sweep_interval=0.05, redeliver_after=0.2, max_redeliver_delay=0.4)


@pytest.mark.parametrize("outcome", ["rejected", "expired"])
def test_a_page_whose_write_was_rejected_or_expired_is_not_published_and_the_run_not_delivered(
    log_url: str, tmp_path: Path, outcome: str
) -> None:
    root = public_root(tmp_path)
    fake = FakeGoose(ping_interval=0.05)
    turn = (
        Turn()
        .confirm_tool("write_file", WRITE, result="wrote public/fox.html", call_id="call_w1")
        .text(CLAIM)
    )
    expiry = 900.0 if outcome == "rejected" else 0.2

    async def main() -> tuple[dict[str, Any], list[Event]]:
        async with gateway_client(
            log_url,
            fake,
            settings=GatewaySettings(
                lifecycle=LifecycleSettings(max_follow_ups=0), approvals=QUICK
            ),
            approval_expiry=expiry,
            **options(tmp_path),
        ) as (client, gateway, log):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(fake, gateway, turn)
            run_id = await start_run(client, "做一个关于狐狸的页面")
            approval = await pending_approval(client)
            if outcome == "rejected":
                decided = await decide(client, approval, "reject")
                assert decided.status_code == 200, decided.text
            shown = await wait_status(client, run_id, "finished")
            return shown, log.read(run_id=run_id)

    shown, events = asyncio.run(main())
    assert [(c.id, c.action) for c in fake.confirmation_calls] == [("call_w1", "deny_once")]
    assert not (root / "fox.html").exists()
    assert run_types(events)[-2:] == ["guard_failed", "Finish"]
    assert events[-2].data["missing"] == ["public/fox.html"]
    assert events[-1].data["guard_failed"] is True and shown["guard_failed"] is True


def test_a_page_whose_write_was_approved_is_published(log_url: str, tmp_path: Path) -> None:
    root = public_root(tmp_path)
    fake = FakeGoose(ping_interval=0.05)
    turn = (
        Turn()
        .confirm_tool("write_file", WRITE, result="wrote public/fox.html", call_id="call_w2")
        .text(CLAIM)
    )

    async def main() -> dict[str, Any]:
        async with gateway_client(
            log_url, fake, settings=GatewaySettings(approvals=QUICK), **options(tmp_path)
        ) as (
            client,
            gateway,
            log,
        ):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(fake, gateway, turn)
            run_id = await start_run(client, "做一个关于狐狸的页面")
            decided = await decide(client, await pending_approval(client), "approve")
            assert decided.status_code == 200, decided.text
            return await wait_status(client, run_id, "finished")

    shown = asyncio.run(main())
    assert (root / "fox.html").read_text() == HTML
    assert shown["guard_failed"] is False and shown["attempt"] == 1
