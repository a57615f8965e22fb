"""The approval routes under random requests, with a real pending approval to aim at: never a
5xx; a refused request changes no approval and writes no event; only a refused decision whose
body was a decision is audited (who tried what), and only a 200 changes the approval."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway, GatewaySettings, HttpSettings
from gateway_kit.approvals.tables import APPROVALS, AUDIT
from gateway_kit.testing import FakeGoose, Turn
from tests.support.raw_requests import (
    JSON_TYPE,
    PREFIX,
    Answer,
    Call,
    assert_json_error,
    running_gateway,
)
from tests.support.runs import bound_session
from tests.support.waiting import until

EXAMPLES = 150
ALLOWED = {200, 400, 404, 405, 409, 410, 413, 415}
MAX_BODY = 4096
ASK = {
    "type": "actionRequired",
    "data": {
        "actionType": "toolConfirmation",
        "id": "call_surface",
        "toolName": "shell",
        "arguments": {"command": "ls"},
        "prompt": None,
    },
}
VISIBLE = {"userVisible": True, "agentVisible": True}


def state(log: EventLog) -> tuple[Any, ...]:
    with log.tables.engine.connect() as conn:
        events = conn.execute(sa.text("SELECT count(*) FROM gateway_kit_events")).scalar()
        rows = conn.execute(sa.text(f"SELECT * FROM {APPROVALS} ORDER BY approval_id")).all()
        audit = conn.execute(sa.text(f"SELECT count(*) FROM {AUDIT}")).scalar()
    return events, tuple(tuple(row) for row in rows), audit


@contextlib.contextmanager
def pending(log_url: str) -> Iterator[tuple[asyncio.Runner, Gateway, EventLog, dict[str, Any]]]:
    with asyncio.Runner() as runner:
        fake = FakeGoose(ping_interval=0.05)
        gates = contextlib.AsyncExitStack()
        opened = running_gateway(
            log_url, fake, settings=GatewaySettings(http=HttpSettings(max_body_bytes=MAX_BODY))
        )
        gateway, log = runner.run(gates.enter_async_context(opened))
        try:
            asking = Turn().message({"role": "assistant", "content": [ASK], "metadata": VISIBLE})
            bound_session(fake, gateway, asking.hang())
            start = Call(
                "POST", f"{PREFIX}/streams/conv/runs".encode(), headers=JSON_TYPE,
                body=b'{"message": "go"}',
            )  # fmt: skip
            assert runner.run(start(gateway)).status == 200
            assert gateway.approvals is not None
            service = gateway.approvals
            found: list[Any] = []

            async def asked() -> bool:
                found[:] = await service.of_stream("conv")
                return bool(found)

            runner.run(until(asked, 10))
            yield runner, gateway, log, found[0].as_json()
        finally:
            fake.restart()  # its turn waits for an answer for ever: the fake stops waiting
            runner.run(gates.aclose())


def bodies(approval: dict[str, Any]) -> st.SearchStrategy[bytes]:
    good_hash = approval["args_hash"]
    values = st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=20),
        st.sampled_from(["approve", "reject", good_hash, "0" * 64, "A" * 64]),
        st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers()),
    )  # fmt: skip
    documents = st.dictionaries(
        st.sampled_from(["decision", "args_hash", "reason", "response", "x"]), values, max_size=5
    )
    return st.one_of(
        documents.map(lambda d: json.dumps(d).encode()),
        st.binary(max_size=64),
        st.just(b"[" * 3000),
        st.just(b'{"decision": "approve", "args_hash": "' + b"a" * MAX_BODY + b'"}'),
        st.just(b'{"decision": "\\ud800", "args_hash": 1}'),
    )


def ids(approval: dict[str, Any]) -> st.SearchStrategy[str]:
    real = approval["approval_id"]
    return st.one_of(
        st.just(real),
        st.just("apr_" + "0" * 32),
        st.sampled_from([real.upper(), real + "x", "%2e%2e", "a%00b", "", "s" * 300]),
        st.text(alphabet="abcdef0123456789_apr", max_size=40),
    )


def calls(approval: dict[str, Any]) -> st.SearchStrategy[Call]:
    headers = st.sampled_from(
        [
            JSON_TYPE,
            [(b"content-type", b"text/plain")],
            [],
            [*JSON_TYPE, (b"content-length", b"9" * 5000)],
        ]
    )

    def build(method: str, route: str, approval_id: str, body: bytes, head: Any) -> Call:
        path = f"{PREFIX}/approvals/{approval_id}/{route}"
        if route == "list":
            path = f"{PREFIX}/streams/{approval_id or 'conv'}/approvals"
        return Call(method, path.encode(), headers=head, body=body)

    return st.builds(
        build,
        st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE"]),
        st.sampled_from(["decision", "decision", "claim", "list"]),
        ids(approval),
        bodies(approval),
        headers,
    )


def test_no_approval_request_is_a_5xx_and_a_refused_one_changes_nothing(log_url: str) -> None:
    with pending(log_url) as (runner, gateway, log, approval):
        seen: set[int] = set()

        def one_request(call: Call) -> None:
            before = state(log)
            answer: Answer = runner.run(call(gateway))
            seen.add(answer.status)
            assert answer.status in ALLOWED, (answer.status, answer.body[:300])
            after = state(log)
            if answer.status == 200:
                return
            assert_json_error(answer, answer.status)
            assert after[:2] == before[:2], "a refused request changed an approval or the log"
            if after[2] != before[2]:  # audited: a decision that was a decision, refused
                assert answer.status in (409, 410), answer.status

        settings(max_examples=EXAMPLES, deadline=None)(given(calls(approval))(one_request))()
        assert {400, 404} <= seen, seen
        # however it went, the approval is still one row, pending or decided once
        assert gateway.approvals is not None
        final = runner.run(gateway.approvals.get(approval["approval_id"]))
        audit = [e.action for e in gateway.approvals.store.audit_of(approval["approval_id"])]
        assert audit.count("decided") == (1 if final.status in ("approved", "rejected") else 0)
        assert final.status in ("pending", "approved", "rejected")
