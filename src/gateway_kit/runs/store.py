"""Runs, their attempts, their stream → session bindings and their bills in the database,
shared by every gateway process."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ..bindings.goose_sessions import SessionBindings
from ..exceptions import RecoveryUsed, RunConflict
from ..hooks.results import RECOVERY_TRY_MARK
from ..identity.owners import claim
from ..log import Event
from ..log.event import ERROR
from ..log.schema import RUN_STARTER_LOCK_CLASS
from ..log.transaction import Transaction
from .bills import BILL, Bills, idempotency_key
from .model import Attempt, AttemptKind, Run, RunStatus
from .tables import attempts, runs


def _run(row: Any) -> Run:
    return Run(
        run_id=row.run_id,
        stream=row.stream,
        session_id=row.session_id,
        upstream_request_id=row.upstream_request_id,
        status=RunStatus(row.status),
        attempt=row.attempt,
        cancel_requested=bool(row.cancel_requested),
        message=row.message,
        created_at=row.created_at,
        finished_at=row.finished_at,
        started_by=row.started_by,
    )


def _attempt(row: Any) -> Attempt:
    recovery, recovery_try = _recovery_of(row.recovery)
    return Attempt(
        run_id=row.run_id,
        number=row.number,
        upstream_request_id=row.upstream_request_id,
        session_id=row.session_id,
        kind=AttemptKind(row.kind),
        recovery=recovery,
        reason=row.reason,
        started_at=row.started_at,
        recovery_try=recovery_try,
    )


# The database keeps one row per (run, recovery): a kind's second and later tries are stored
# as "kind#2", "kind#3", ..., so that each try is still taken once whichever process plans it.
def _stored_recovery(recovery: str | None, recovery_try: int) -> str | None:
    if recovery is None or recovery_try <= 1:
        return recovery
    return f"{recovery}{RECOVERY_TRY_MARK}{recovery_try}"


def _recovery_of(stored: str | None) -> tuple[str | None, int | None]:
    if stored is None:
        return None, None
    kind, mark, number = stored.rpartition(RECOVERY_TRY_MARK)
    if mark and number.isdigit():
        return kind, int(number)
    return stored, 1


ACTIVE = RunStatus.ACTIVE.value
# The reads made for every run, made once: they are compiled once per database driver.
RUN = sa.select(runs).where(runs.c.run_id == sa.bindparam("run_id"))
RUN_OF_REQUEST = (
    sa.select(runs)
    .join(attempts, attempts.c.run_id == runs.c.run_id)
    .where(attempts.c.upstream_request_id == sa.bindparam("request_id"))
)
LATEST_RUN_OF_SESSION = (
    sa.select(runs)
    .where(runs.c.session_id == sa.bindparam("session"))
    .order_by(runs.c.created_at.desc())
    .limit(1)
)
LATEST_ENDED_RUN_OF_SESSION = LATEST_RUN_OF_SESSION.where(runs.c.status != ACTIVE)
ACTIVE_RUNS = sa.select(runs).where(runs.c.status == ACTIVE).order_by(runs.c.created_at)
ACTIVE_RUNS_OF_SESSION = ACTIVE_RUNS.where(runs.c.session_id == sa.bindparam("session"))
ACTIVE_RUN_OF_STREAM = ACTIVE_RUNS.where(runs.c.stream == sa.bindparam("stream"))
SERVES_ACTIVE_RUN = (
    sa.select(runs.c.run_id)
    .where(runs.c.session_id == sa.bindparam("session"), runs.c.status == ACTIVE)
    .limit(1)
)
ATTEMPTS = (
    sa.select(attempts)
    .where(attempts.c.run_id == sa.bindparam("run_id"))
    .order_by(attempts.c.number)
)
ATTEMPT_OF_REQUEST = sa.select(attempts).where(
    attempts.c.upstream_request_id == sa.bindparam("request_id")
)
END = (
    runs.update()
    .where(runs.c.run_id == sa.bindparam("end_run_id"))
    .where(runs.c.status == ACTIVE)
    .values(status=sa.bindparam("end_status"), finished_at=sa.bindparam("end_at"))
)
ACTIVE_OF_STARTER = (
    sa.select(sa.func.count())
    .select_from(runs)
    .where(runs.c.started_by == sa.bindparam("user"), runs.c.status == ACTIVE)
)
# SQL text, since SQLAlchemy has no construct for PostgreSQL's advisory locks.
LOCK_STARTER = sa.text(f"SELECT pg_advisory_xact_lock({RUN_STARTER_LOCK_CLASS}, hashtext(:user))")
TOO_MANY_ACTIVE = (
    "{user!r} has {active} active run(s), the most one user may have at once; "
    "start another once one has ended"
)
SESSION_MOVED = "stream {stream!r} moved to another goose session while the run started"
REQUEST_CANCEL = (
    runs.update()
    .where(runs.c.run_id == sa.bindparam("run_id"))
    .where(runs.c.status == ACTIVE)
    .values(cancel_requested=True)
)


class _NotGoingOn(Exception):
    """The run ended or was asked to stop: its next attempt is not recorded."""


class TooManyActiveRuns(Exception):
    """The user who starts a run has as many active runs as one user may: none is recorded."""


class SessionMoved(Exception):
    """The stream's goose session changed since the run was made for it: none is recorded."""


class RunStore(SessionBindings, Bills):
    """Runs and their attempts; with the stream → session bindings
    (`gateway_kit.bindings.goose_sessions`) and the bills (`bills.py`).

    :param log: the log whose database holds them (`log.tables`).
    """

    def serves_active_run(self, conn: sa.Connection, session_id: str) -> bool:
        return conn.execute(SERVES_ACTIVE_RUN, {"session": session_id}).first() is not None

    # --- runs ------------------------------------------------------------------------------

    def create(
        self,
        run: Run,
        claim_for: str | None = None,
        *,
        max_active: int | None = None,
        bound: bool = False,
    ) -> Run:
        """Record a new active run; `RunConflict` if the stream already has one. With
        `claim_for`, the same transaction makes that user the stream's owner, which it must
        still be free to take (`StreamTaken` otherwise): a run that is not recorded claims
        nothing. With `max_active`, the run's starter (`run.started_by`) must have fewer
        active runs (`TooManyActiveRuns` otherwise), counted under a lock of that user, so
        that processes starting runs at once never pass it together. With `bound`, the stream
        must still be bound to the run's session (`SessionMoved` otherwise)."""
        values = {
            "run_id": run.run_id,
            "stream": run.stream,
            "session_id": run.session_id,
            "upstream_request_id": run.upstream_request_id,
            "status": run.status.value,
            "attempt": run.attempt,
            "cancel_requested": run.cancel_requested,
            "message": run.message,
            "created_at": run.created_at,
            "started_by": run.started_by,
        }
        first = {
            "run_id": run.run_id,
            "number": 1,
            "upstream_request_id": run.upstream_request_id,
            "session_id": run.session_id,
            "kind": AttemptKind.INITIAL.value,
            "started_at": run.created_at,
        }
        try:
            with self.tables.transaction() as conn:
                if max_active is not None and run.started_by is not None:
                    self._check_active(conn, run.started_by, max_active)
                if bound and not self.still_bound(conn, run.stream, run.session_id):
                    raise SessionMoved(SESSION_MOVED.format(stream=run.stream))
                if claim_for is not None:
                    claim(conn, run.stream, claim_for)
                conn.execute(runs.insert().values(**values))
                conn.execute(attempts.insert().values(**first))
        except sa.exc.IntegrityError as exc:
            raise RunConflict(f"stream {run.stream!r} already has an active run") from exc
        return run

    def _check_active(self, conn: sa.Connection, user: str, max_active: int) -> None:
        # On SQLite the transaction holds the database's write lock from its start (BEGIN
        # IMMEDIATE): no other run is recorded between this count and the commit.
        if conn.dialect.name == "postgresql":
            conn.execute(LOCK_STARTER, {"user": user})
        active = conn.execute(ACTIVE_OF_STARTER, {"user": user}).scalar_one()
        if active >= max_active:
            raise TooManyActiveRuns(TOO_MANY_ACTIVE.format(user=user, active=active))

    def active_count(self, user: str) -> int:
        """How many runs `user` started are active."""
        return int(self._rows(ACTIVE_OF_STARTER, {"user": user})[0][0])

    def add_attempt(
        self,
        run: Run,
        *,
        request_id: str,
        session_id: str,
        kind: AttemptKind,
        recovery: str | None = None,
        recovery_try: int = 1,
        reason: str | None = None,
    ) -> Run | None:
        """Record the run's next attempt and make it the current one; None, recording nothing,
        when the run has ended or a cancel was asked for meanwhile (in any process).

        `RecoveryUsed` when the run already had this try of this kind of recovery (in any
        process): the database takes each try once.
        """
        try:
            with self.tables.transaction() as conn:
                number = conn.execute(
                    sa.select(sa.func.max(attempts.c.number)).where(attempts.c.run_id == run.run_id)
                ).scalar_one()
                number = (number or 0) + 1
                moved_on = conn.execute(
                    runs.update()
                    .where(runs.c.run_id == run.run_id)
                    .where(runs.c.status == ACTIVE)
                    .where(runs.c.cancel_requested == sa.false())
                    .values(attempt=number, upstream_request_id=request_id, session_id=session_id)
                )
                if not moved_on.rowcount:
                    raise _NotGoingOn
                conn.execute(
                    attempts.insert().values(
                        run_id=run.run_id,
                        number=number,
                        upstream_request_id=request_id,
                        session_id=session_id,
                        kind=kind.value,
                        recovery=_stored_recovery(recovery, recovery_try),
                        reason=reason,
                        started_at=time.time(),
                    )
                )
        except _NotGoingOn:
            return None
        except sa.exc.IntegrityError as exc:
            raise RecoveryUsed(
                f"run {run.run_id!r} already had try {recovery_try} of a {recovery!r} recovery"
            ) from exc
        return self.get(run.run_id)

    def attempts(self, run_id: str) -> list[Attempt]:
        return [_attempt(row) for row in self._rows(ATTEMPTS, {"run_id": run_id})]

    def attempt_of_request(self, request_id: str) -> Attempt | None:
        row = self._first(ATTEMPT_OF_REQUEST, {"request_id": request_id})
        return None if row is None else _attempt(row)

    def get(self, run_id: str) -> Run | None:
        row = self._first(RUN, {"run_id": run_id})
        return None if row is None else _run(row)

    def active_run(self, stream: str) -> Run | None:
        row = self._first(ACTIVE_RUN_OF_STREAM, {"stream": stream})
        return None if row is None else _run(row)

    def active_of_streams(self, streams: Sequence[str]) -> list[tuple[str, str]]:
        """(stream, run id) of the active run of each of `streams` that has one."""
        return [
            (stream, row.run_id)
            for stream in streams
            for row in self._rows(ACTIVE_RUN_OF_STREAM, {"stream": stream})
        ]

    def active_runs(self, session_id: str | None = None) -> list[Run]:
        if session_id is None:
            return [_run(row) for row in self._rows(ACTIVE_RUNS)]
        return [_run(row) for row in self._rows(ACTIVE_RUNS_OF_SESSION, {"session": session_id})]

    def latest_run(self, session_id: str) -> Run | None:
        row = self._first(LATEST_RUN_OF_SESSION, {"session": session_id})
        return None if row is None else _run(row)

    def latest_ended_run(self, session_id: str) -> Run | None:
        """The run of the session that started last among those that have ended."""
        row = self._first(LATEST_ENDED_RUN_OF_SESSION, {"session": session_id})
        return None if row is None else _run(row)

    def by_upstream_request(self, request_id: str) -> Run | None:
        """The run one of whose attempts is goose's request `request_id`."""
        row = self._first(RUN_OF_REQUEST, {"request_id": request_id})
        return None if row is None else _run(row)

    def end(self, run_id: str, status: RunStatus) -> bool:
        """Move an active run to `status`; False when it had already ended. For runs that
        never reached goose: a run that did ends with its terminal event (`write_ending`)."""
        result = self.tables.write(END, end_params(run_id, status))
        return bool(result.rowcount)

    def settle(self, run: Run, terminal: Event) -> bool:
        """Bring the row of a run the log has ended (by `terminal`) in line with that end;
        False when it was already."""
        status = ending_status(terminal.type, cancel_requested=run.cancel_requested)
        return self.end(run.run_id, status)

    def request_cancel(self, run_id: str) -> bool:
        result = self.tables.write(REQUEST_CANCEL, {"run_id": run_id})
        return bool(result.rowcount)


def ending_status(event_type: str, *, cancel_requested: bool) -> RunStatus:
    """The status a run's terminal event of `event_type` gives it."""
    if event_type == ERROR:
        return RunStatus.FAILED
    return RunStatus.CANCELLED if cancel_requested else RunStatus.FINISHED


def end_params(run_id: str, status: RunStatus) -> dict[str, Any]:
    return {"end_run_id": run_id, "end_status": status.value, "end_at": time.time()}


def write_ending(
    transaction: Transaction,
    run: Run,
    status: RunStatus,
    usage: dict[str, Any] | None,
    *,
    others_from: float = 0.0,
) -> None:
    """In the transaction of the run's terminal event: its status and, when it is billed, its
    bill, to be delivered after the commit. Other processes' scans leave the bill alone until
    `others_from` (epoch seconds): the process that ended the run delivers it first."""
    transaction.execute(END, end_params(run.run_id, status))
    if usage is None:
        return
    bill = {
        "bill_run_id": run.run_id,
        "bill_key": idempotency_key(run.run_id),
        "bill_stream": run.stream,
        "bill_status": status.value,
        "bill_usage": json.dumps(usage),
        "bill_created_at": time.time(),
        "bill_next_try_at": others_from,
    }
    transaction.execute(BILL, bill)
