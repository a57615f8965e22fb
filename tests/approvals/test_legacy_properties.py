"""The legacy pending list under random requests: never a 5xx, never a write.

Hostile query strings (raw bytes, bad percent-encoding, lone surrogates, NULs, names longer
than any stream's, repeated and odd keys), with or without credentials, and now and then
another method. The HTTP surface's own property test walks the gateway's routes under its
prefix; this path is outside it, so it has its test here.
"""

from __future__ import annotations

import asyncio
import contextlib
import string
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway, GooseUpstream, LegacySurfaces
from gateway_kit.approvals import Kind
from gateway_kit.approvals.goose_actions import ActionRequest
from gateway_kit.approvals.tables import APPROVALS, AUDIT
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.testing import FakeGoose
from tests.support.raw_requests import ALLOWED_STATUSES, Call, assert_json_error, writes

PATH = b"/api/plan-approvals/pending"
EXAMPLES = 200
SHELL = ActionRequest(Kind.TOOL_CONFIRMATION, "call_1", "shell", {"command": "ls"}, None)
ODD_VALUES = [
    "",
    "conv",
    "other",
    "a%00b",
    "%00",
    "%ZZ",
    "%",
    "%ED%A0%80",  # a UTF-8-encoded surrogate
    "%FF%FE",
    "c" * 200,
    "c" * 201,
    "%C3%A9" * 201,
    "é",
    "\udc80",  # a lone surrogate, sent as the raw byte it escapes
    "a&conversation_id=b",
    "9" * 5000,
]


def approvals_rows(log: EventLog) -> tuple[Any, ...]:
    with log.tables.engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT * FROM {APPROVALS} ORDER BY approval_id"))
        audit = conn.execute(sa.text(f"SELECT count(*) FROM {AUDIT}"))
        return (tuple(tuple(row) for row in rows), audit.scalar())


def encoded(value: str, quoted: bool) -> bytes:
    text = quote(value, safe="", errors="surrogateescape") if quoted else value
    return text.encode("utf-8", "surrogateescape")


keys = st.one_of(
    st.sampled_from(["conversation_id", "conversation_id", "x", "", "conversation_id[]"]),
    st.text(alphabet=string.printable, max_size=6),
)
values = st.one_of(st.sampled_from(ODD_VALUES), st.text(max_size=12), st.integers().map(str))
queries = st.one_of(
    st.lists(
        st.builds(
            lambda k, v, quoted: encoded(k, True) + b"=" + encoded(v, quoted),
            keys,
            values,
            st.booleans(),
        ),
        max_size=4,
    ).map(b"&".join),
    st.binary(max_size=40),
)
methods = st.one_of(st.just("GET"), st.just("GET"), st.sampled_from(["POST", "HEAD", "DELETE"]))


@contextlib.contextmanager
def listed(log_url: str) -> Iterator[tuple[asyncio.Runner, Gateway, EventLog, dict[str, bytes]]]:
    """A gateway whose log holds pending approvals of two streams, and the credentials a
    request may carry."""
    with asyncio.Runner() as runner, EventLog(log_url) as log:
        StreamOwners(log).declare("conv", "alice")
        _, token = ApiTokens(log).create("alice")
        fake = FakeGoose()
        upstream = GooseUpstream(secret_key=fake.secret_key, client=fake.client())
        gateway = Gateway(
            log=log,
            upstream=upstream,
            load_entry_points=False,
            legacy=LegacySurfaces(approvals="/api/plan-approvals/pending"),
        )
        assert gateway.approvals is not None
        for stream in ("conv", "other"):
            runner.run(
                gateway.approvals.request(
                    SHELL, stream=stream, run_id=None, session_id=stream, lifetime=0
                )
            )
        credentials = {
            "alice": f"Bearer {token}".encode(),
            "wrong": b"Bearer not-a-token",
            "odd": b"Bearer \xff\x00",
        }
        yield runner, gateway, log, credentials


def test_the_legacy_pending_list_never_answers_5xx_and_writes_nothing(log_url: str) -> None:
    with listed(log_url) as (runner, gateway, log, credentials):
        before = (writes(log), approvals_rows(log))
        statuses: set[int] = set()

        def one_request(method: str, query: bytes, who: str | None) -> None:
            headers = [] if who is None else [(b"authorization", credentials[who])]
            answer = runner.run(Call(method, PATH, query, headers)(gateway))
            assert answer.status in ALLOWED_STATUSES, (answer.status, answer.body[:300])
            statuses.add(answer.status)
            if answer.status >= 400:
                assert_json_error(answer, answer.status)
            elif method == "GET":
                document = answer.json()
                assert document["success"] is True
                assert {a["conversation_id"] for a in document["approvals"]} <= {"conv"}
            assert (writes(log), approvals_rows(log)) == before, "a read wrote"

        test = given(methods, queries, st.sampled_from([None, "alice", "alice", "wrong", "odd"]))(
            one_request
        )
        for query in (b"", b"conversation_id=conv", b"conversation_id=a%00b", b"\xff\xfe"):
            test = example("GET", query, "alice")(test)
        test = example("GET", b"conversation_id=" + b"9" * 5000, "alice")(test)
        test = example("GET", b"", None)(test)
        test = example("POST", b"", "alice")(test)
        settings(max_examples=EXAMPLES, deadline=None)(test)()
        assert {200, 400, 401, 405} <= statuses, statuses  # the examples ran
