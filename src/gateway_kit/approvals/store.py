"""`ApprovalStore`: the approvals' rows, their audit, and the events that tell clients of them.

Every change of an approval is one transaction: the row (checked against the version it was
read at), its audit entry and, when clients are told, the stream's event. Of two racing
changes one commits and the other raises `Changed`, reads the row again and decides anew: so
of twenty people deciding at once exactly one decision is taken, and the nineteen others are
told who decided. A refused decision is audited too, on its own.

Reads are single queries on the log's reader connection.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..identity.tables import stream_owners
from ..log import EventLog
from ..log.transaction import Transaction
from ..runs.model import RunStatus
from ..runs.tables import runs
from ..types import JSONObject
from .events import REQUESTED, event_of
from .model import Approval, Kind, Status
from .tables import APPROVALS, OWED, PENDING, approvals, audit

RECENT = 50  # closed approvals a stream's list shows, newest first
# Pending approvals a stream's list shows, oldest first: goose waits for one at a time per
# session, so more is a goose that asks without waiting, and the list stays bounded anyway.
MOST_PENDING = 200
COLUMNS = [column.name for column in approvals.columns]

BY_ID = sa.select(approvals).where(approvals.c.approval_id == sa.bindparam("approval_id"))
BY_INVOCATION = sa.select(approvals).where(
    approvals.c.session_id == sa.bindparam("session_id"),
    approvals.c.lifetime == sa.bindparam("lifetime"),
    approvals.c.request_id == sa.bindparam("request_id"),
)
PENDING_OF_STREAM = (
    sa.select(approvals)
    .where(approvals.c.stream == sa.bindparam("stream"), approvals.c.status == Status.PENDING)
    .order_by(approvals.c.requested_at)
    .limit(sa.bindparam("limit"))
)
CLOSED_OF_STREAM = (
    sa.select(approvals)
    .where(approvals.c.stream == sa.bindparam("stream"), approvals.c.status != Status.PENDING)
    .order_by(approvals.c.requested_at.desc())
    .limit(sa.bindparam("limit"))
)
PENDING_ROWS = sa.select(approvals).where(sa.text(PENDING))
PENDING_TOOL_CONFIRMATIONS = (
    sa.select(approvals)
    .where(sa.text(f"{APPROVALS}.{PENDING}"), approvals.c.kind == Kind.TOOL_CONFIRMATION)
    .order_by(approvals.c.requested_at, approvals.c.approval_id)
)
OWED_ROWS = sa.select(approvals).where(sa.text(OWED))
# Pending approvals whose run is over: goose no longer waits for them.
PENDING_OF_ENDED_RUNS = (
    sa.select(approvals)
    .join(runs, runs.c.run_id == approvals.c.run_id)
    .where(sa.text(f"{APPROVALS}.{PENDING}"), runs.c.status != RunStatus.ACTIVE)
)
AUDIT_OF = (
    sa.select(audit).where(audit.c.approval_id == sa.bindparam("approval_id")).order_by(audit.c.id)
)
ADD_AUDIT = sa.insert(audit).values(
    approval_id=sa.bindparam("a_approval_id"),
    at=sa.bindparam("a_at"),
    action=sa.bindparam("a_action"),
    principal=sa.bindparam("a_principal"),
    detail=sa.bindparam("a_detail"),
)
UPDATE = (
    sa.update(approvals)
    .where(
        approvals.c.approval_id == sa.bindparam("u_approval_id"),
        approvals.c.version == sa.bindparam("u_version"),
    )
    .values({name: sa.bindparam(name) for name in COLUMNS if name != "approval_id"})
)


def _insert_statement(dialect: Any) -> sa.Executable:
    # RETURNING says whether the row went in: a second sight of the same invocation does not.
    statement: sa.Executable = (
        dialect.insert(approvals)
        .on_conflict_do_nothing(
            index_elements=[approvals.c.session_id, approvals.c.lifetime, approvals.c.request_id]
        )
        .returning(approvals.c.approval_id)
    )
    return statement


INSERT = {"sqlite": _insert_statement(sqlite), "postgresql": _insert_statement(postgresql)}


class Changed(Exception):
    """The row changed since it was read (or went in under another id): read it again."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    approval_id: str
    at: float
    action: str
    principal: str | None
    detail: JSONObject

    def as_json(self) -> JSONObject:
        return dataclasses.asdict(self)


def _audit_params(
    approval_id: str, at: float, action: str, principal: str | None, detail: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "a_approval_id": approval_id,
        "a_at": at,
        "a_action": action,
        "a_principal": principal,
        "a_detail": json.dumps(dict(detail), ensure_ascii=False, sort_keys=True),
    }


class ApprovalStore:
    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.tables = log.tables

    # --- reads

    def _approvals(self, statement: sa.Executable, **params: Any) -> list[Approval]:
        return [Approval.from_row(row) for row in self.tables.select(statement, params)]

    def get(self, approval_id: str) -> Approval | None:
        found = self._approvals(BY_ID, approval_id=approval_id)
        return found[0] if found else None

    def find(self, session_id: str, lifetime: int, request_id: str) -> Approval | None:
        found = self._approvals(
            BY_INVOCATION, session_id=session_id, lifetime=lifetime, request_id=request_id
        )
        return found[0] if found else None

    def of_stream(self, stream: str, recent: int = RECENT) -> list[Approval]:
        """The stream's pending approvals, oldest first (`MOST_PENDING` at most), then its
        `recent` closed ones, newest first."""
        pending = self._approvals(PENDING_OF_STREAM, stream=stream, limit=MOST_PENDING)
        return pending + self._approvals(CLOSED_OF_STREAM, stream=stream, limit=recent)

    def pending_of_streams(self, streams: Sequence[str]) -> list[tuple[str, str]]:
        """(stream, approval id) of every pending approval of these streams."""
        if not streams:
            return []
        statement = sa.select(approvals.c.stream, approvals.c.approval_id).where(
            approvals.c.stream.in_(list(streams)), approvals.c.status == Status.PENDING
        )
        return [(row.stream, row.approval_id) for row in self.tables.select(statement)]

    def pending_tool_confirmations(
        self, streams: Sequence[str], limit: int = MOST_PENDING
    ) -> list[Approval]:
        """The pending tool confirmations of `streams`, oldest first: `limit` at most."""
        if not streams or limit <= 0:
            return []
        statement = PENDING_TOOL_CONFIRMATIONS.where(approvals.c.stream.in_(list(streams)))
        return self._approvals(statement.limit(limit))

    def pending_tool_confirmations_owned_by(
        self, user_id: str, limit: int = MOST_PENDING
    ) -> list[Approval]:
        """The pending tool confirmations of the streams `user_id` owns, oldest first: `limit`
        at most, however many other users have."""
        statement = (
            PENDING_TOOL_CONFIRMATIONS.join(
                stream_owners, stream_owners.c.stream == approvals.c.stream
            )
            .where(stream_owners.c.user_id == user_id)
            .limit(limit)
        )
        return self._approvals(statement)

    def streams_with_pending_tool_confirmations(
        self, not_owned_by: str, limit: int = MOST_PENDING
    ) -> list[str]:
        """The streams not owned by `not_owned_by` (unowned ones too) that hold a pending tool
        confirmation, the one whose oldest is oldest first: `limit` at most."""
        oldest = sa.func.min(approvals.c.requested_at)
        statement = (
            sa.select(approvals.c.stream)
            .select_from(
                approvals.outerjoin(stream_owners, stream_owners.c.stream == approvals.c.stream)
            )
            .where(
                sa.text(f"{APPROVALS}.{PENDING}"),
                approvals.c.kind == Kind.TOOL_CONFIRMATION,
                sa.or_(stream_owners.c.user_id.is_(None), stream_owners.c.user_id != not_owned_by),
            )
            .group_by(approvals.c.stream)
            .order_by(oldest, approvals.c.stream)
            .limit(limit)
        )
        return [row.stream for row in self.tables.select(statement)]

    def pending(self) -> list[Approval]:
        return self._approvals(PENDING_ROWS)

    def owed(self) -> list[Approval]:
        """Approvals answered whose answer goose has not shown it got."""
        return self._approvals(OWED_ROWS)

    def pending_of_ended_runs(self) -> list[Approval]:
        return self._approvals(PENDING_OF_ENDED_RUNS)

    def open_of_session(self, session_id: str, request_ids: Sequence[str] = ()) -> list[Approval]:
        """The session's approvals goose still waits for, or still has to get the answer of;
        only those of `request_ids` when given."""
        statement = sa.select(approvals).where(
            approvals.c.session_id == session_id,
            sa.or_(approvals.c.status == Status.PENDING, sa.text(OWED)),
        )
        if request_ids:
            statement = statement.where(approvals.c.request_id.in_(list(request_ids)))
        return self._approvals(statement)

    def audit_of(self, approval_id: str) -> list[AuditEntry]:
        return [
            AuditEntry(row.approval_id, row.at, row.action, row.principal, json.loads(row.detail))
            for row in self.tables.select(AUDIT_OF, {"approval_id": approval_id})
        ]

    # --- writes

    def create(self, approval: Approval) -> tuple[Approval, bool]:
        """Record a new approval with its `approval_requested` event; when its invocation is
        recorded already, that approval and False."""
        insert = INSERT[self.tables.dialect]

        def also(transaction: Transaction, _events: list[Any]) -> None:
            if not transaction.execute(insert, approval.row()).rows:
                raise Changed  # seen before: the event goes too
            details = {"tool_name": approval.tool_name, "args_hash": approval.args_hash}
            transaction.execute(
                ADD_AUDIT,
                _audit_params(
                    approval.approval_id, approval.requested_at, "requested", None, details
                ),
            )

        try:
            self.log.append_with([event_of(self.log, approval, REQUESTED)], also)
        except Changed:
            found = self.find(approval.session_id, approval.lifetime, approval.request_id)
            if found is None:
                raise  # removed meanwhile: nothing here removes approvals
            return found, False
        return approval, True

    def save(
        self,
        before: Approval,
        after: Approval,
        *,
        at: float,
        audit: Sequence[tuple[str, Mapping[str, Any]]],
        principal: str | None = None,
        event: str | None = None,
    ) -> Approval:
        """Write `after` over `before` (as read: `Changed` when the row moved on since), with
        its `audit` entries (action, detail) and, when `event` is given, the event that tells
        clients."""
        saved = dataclasses.replace(after, version=before.version + 1)
        params = {**saved.row(), "u_approval_id": before.approval_id, "u_version": before.version}
        entries = [
            _audit_params(before.approval_id, at, action, principal, detail)
            for action, detail in audit
        ]

        def also(transaction: Transaction, _events: list[Any]) -> None:
            if transaction.execute(UPDATE, params).rowcount != 1:
                raise Changed
            for entry in entries:
                transaction.execute(ADD_AUDIT, entry)

        if event is not None:
            self.log.append_with([event_of(self.log, saved, event)], also)
            return saved
        with self.tables.transaction() as conn:
            if conn.execute(UPDATE, params).rowcount != 1:
                raise Changed
            for entry in entries:
                conn.execute(ADD_AUDIT, entry)
        return saved

    def note(
        self,
        approval_id: str,
        *,
        at: float,
        audit_action: str,
        principal: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """An audit entry alone: something tried that changed nothing (a refused decision)."""
        self.tables.write(
            ADD_AUDIT, _audit_params(approval_id, at, audit_action, principal, detail or {})
        )
