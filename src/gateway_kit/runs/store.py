"""Runs and stream → session bindings in the database, shared by every gateway process."""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa

from ..exceptions import RecoveryUsed, RunConflict
from ..log.transaction import Transaction
from .model import Attempt, AttemptKind, Bill, Run, RunStatus, SessionBinding
from .tables import attempts, bills, runs, sessions


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
    )


def _attempt(row: Any) -> Attempt:
    return Attempt(
        run_id=row.run_id,
        number=row.number,
        upstream_request_id=row.upstream_request_id,
        session_id=row.session_id,
        kind=AttemptKind(row.kind),
        recovery=row.recovery,
        reason=row.reason,
        started_at=row.started_at,
    )


def _bill(row: Any) -> Bill:
    return Bill(
        run_id=row.run_id,
        idempotency_key=row.idempotency_key,
        stream=row.stream,
        status=row.status,
        usage=json.loads(row.usage),
        created_at=row.created_at,
        tries=row.tries,
        delivered_at=row.delivered_at,
        last_error=row.last_error,
    )


def idempotency_key(run_id: str) -> str:
    """The key every delivery of a run's bill carries: one run, one key."""
    return f"gateway-kit-run:{run_id}"


def _binding(row: Any) -> SessionBinding:
    return SessionBinding(row.stream, row.session_id, int(row.lifetime_start_seq))


class RunStore:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    # --- sessions --------------------------------------------------------------------------

    def binding(self, stream: str) -> SessionBinding | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(sessions).where(sessions.c.stream == stream)).first()
        return None if row is None else _binding(row)

    def binding_of_session(self, session_id: str) -> SessionBinding | None:
        with self.engine.connect() as conn:
            query = sa.select(sessions).where(sessions.c.session_id == session_id)
            row = conn.execute(query).first()
        return None if row is None else _binding(row)

    def bind(self, stream: str, session_id: str) -> SessionBinding:
        """Bind a new goose session to `stream`; if another process bound one first, keep that."""
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    sessions.insert().values(
                        stream=stream,
                        session_id=session_id,
                        lifetime_start_seq=0,
                        created_at=time.time(),
                    )
                )
        except sa.exc.IntegrityError:
            pass
        binding = self.binding(stream)
        assert binding is not None
        return binding

    def rebind(self, stream: str, session_id: str, after_seq: int) -> SessionBinding:
        """Serve `stream` from a new goose session from now on; its goose ids begin after
        `after_seq`, and the old session's pump, finding no binding, stops."""
        with self.engine.begin() as conn:
            conn.execute(
                sessions.update()
                .where(sessions.c.stream == stream)
                .values(session_id=session_id, lifetime_start_seq=after_seq)
            )
        binding = self.binding(stream)
        assert binding is not None
        return binding

    def start_lifetime(self, session_id: str, after_seq: int) -> None:
        """goosed restarted: goose ids of events up to `after_seq` must never be sent again."""
        with self.engine.begin() as conn:
            conn.execute(
                sessions.update()
                .where(sessions.c.session_id == session_id)
                .where(sessions.c.lifetime_start_seq < after_seq)
                .values(lifetime_start_seq=after_seq)
            )

    # --- runs ------------------------------------------------------------------------------

    def create(self, run: Run) -> Run:
        """Record a new active run; `RunConflict` if the stream already has one."""
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
            with self.engine.begin() as conn:
                conn.execute(runs.insert().values(**values))
                conn.execute(attempts.insert().values(**first))
        except sa.exc.IntegrityError as exc:
            raise RunConflict(f"stream {run.stream!r} already has an active run") from exc
        return run

    def add_attempt(
        self,
        run: Run,
        *,
        request_id: str,
        session_id: str,
        kind: AttemptKind,
        recovery: str | None = None,
        reason: str | None = None,
    ) -> Run:
        """Record the run's next attempt and make it the current one.

        `RecoveryUsed` when the run already had a recovery of this kind (in any process): the
        database keeps each kind's budget of one.
        """
        try:
            with self.engine.begin() as conn:
                number = conn.execute(
                    sa.select(sa.func.max(attempts.c.number)).where(attempts.c.run_id == run.run_id)
                ).scalar_one()
                number = (number or 0) + 1
                conn.execute(
                    attempts.insert().values(
                        run_id=run.run_id,
                        number=number,
                        upstream_request_id=request_id,
                        session_id=session_id,
                        kind=kind.value,
                        recovery=recovery,
                        reason=reason,
                        started_at=time.time(),
                    )
                )
                conn.execute(
                    runs.update()
                    .where(runs.c.run_id == run.run_id)
                    .values(attempt=number, upstream_request_id=request_id, session_id=session_id)
                )
        except sa.exc.IntegrityError as exc:
            raise RecoveryUsed(f"run {run.run_id!r} already had a {recovery!r} recovery") from exc
        current = self.get(run.run_id)
        assert current is not None
        return current

    def attempts(self, run_id: str) -> list[Attempt]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(attempts).where(attempts.c.run_id == run_id).order_by(attempts.c.number)
            )
            return [_attempt(row) for row in rows]

    def attempt_of_request(self, request_id: str) -> Attempt | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(attempts).where(attempts.c.upstream_request_id == request_id)
            ).first()
        return None if row is None else _attempt(row)

    def get(self, run_id: str) -> Run | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).first()
        return None if row is None else _run(row)

    def active_run(self, stream: str) -> Run | None:
        return next(iter(self._select(runs.c.stream == stream, active=True)), None)

    def active_runs(self, session_id: str | None = None) -> list[Run]:
        where = sa.true() if session_id is None else runs.c.session_id == session_id
        return self._select(where, active=True)

    def latest_run(self, session_id: str) -> Run | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(runs)
                .where(runs.c.session_id == session_id)
                .order_by(runs.c.created_at.desc())
                .limit(1)
            ).first()
        return None if row is None else _run(row)

    def by_upstream_request(self, request_id: str) -> Run | None:
        """The run one of whose attempts is goose's request `request_id`."""
        attempt = self.attempt_of_request(request_id)
        return None if attempt is None else self.get(attempt.run_id)

    def end(self, run_id: str, status: RunStatus) -> bool:
        """Move an active run to `status`; False when it had already ended. For runs that
        never reached goose: a run that did ends with its terminal event (`ending_rows`)."""
        with self.engine.begin() as conn:
            result = conn.execute(end_statement(run_id, status))
        return bool(result.rowcount)

    # --- bills -----------------------------------------------------------------------------

    def bill(self, run_id: str) -> Bill | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(bills).where(bills.c.run_id == run_id)).first()
        return None if row is None else _bill(row)

    def bills(self, *, undelivered: bool = False) -> list[Bill]:
        query = sa.select(bills).order_by(bills.c.created_at)
        if undelivered:
            query = query.where(bills.c.delivered_at.is_(None))
        with self.engine.connect() as conn:
            return [_bill(row) for row in conn.execute(query)]

    def due_bills(self, now: float, limit: int = 100) -> list[str]:
        """Undelivered bills whose next try is due and that nobody holds a claim on."""
        query = (
            sa.select(bills.c.run_id)
            .where(bills.c.delivered_at.is_(None))
            .where(bills.c.next_try_at <= now)
            .where(sa.or_(bills.c.claimed_until.is_(None), bills.c.claimed_until < now))
            .order_by(bills.c.next_try_at)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [row.run_id for row in conn.execute(query)]

    def claim_bill(self, run_id: str, holder: str, ttl: float) -> Bill | None:
        """Take the delivery of a bill for `ttl` seconds; None if delivered or claimed."""
        now = time.time()
        with self.engine.begin() as conn:
            result = conn.execute(
                bills.update()
                .where(bills.c.run_id == run_id)
                .where(bills.c.delivered_at.is_(None))
                .where(sa.or_(bills.c.claimed_until.is_(None), bills.c.claimed_until < now))
                .values(claimed_by=holder, claimed_until=now + ttl, tries=bills.c.tries + 1)
            )
        return self.bill(run_id) if result.rowcount else None

    def bill_delivered(self, run_id: str, holder: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                bills.update()
                .where(bills.c.run_id == run_id)
                .where(bills.c.claimed_by == holder)
                .values(delivered_at=time.time(), claimed_until=None, last_error=None)
            )

    def bill_failed(self, run_id: str, holder: str, error: str, retry_at: float) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                bills.update()
                .where(bills.c.run_id == run_id)
                .where(bills.c.claimed_by == holder)
                .values(claimed_until=None, next_try_at=retry_at, last_error=error)
            )

    def request_cancel(self, run_id: str) -> bool:
        with self.engine.begin() as conn:
            result = conn.execute(
                runs.update()
                .where(runs.c.run_id == run_id)
                .where(runs.c.status == RunStatus.ACTIVE.value)
                .values(cancel_requested=True)
            )
        return bool(result.rowcount)

    def _select(self, where: Any, *, active: bool = False) -> list[Run]:
        query = sa.select(runs).where(where)
        if active:
            query = query.where(runs.c.status == RunStatus.ACTIVE.value)
        with self.engine.connect() as conn:
            return [_run(row) for row in conn.execute(query.order_by(runs.c.created_at))]


def end_statement(run_id: str, status: RunStatus) -> sa.Update:
    return (
        runs.update()
        .where(runs.c.run_id == run_id)
        .where(runs.c.status == RunStatus.ACTIVE.value)
        .values(status=status.value, finished_at=time.time())
    )


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
    transaction.execute(end_statement(run.run_id, status))
    if usage is None:
        return
    transaction.execute(
        bills.insert().values(
            run_id=run.run_id,
            idempotency_key=idempotency_key(run.run_id),
            stream=run.stream,
            status=status.value,
            usage=json.dumps(usage),
            created_at=time.time(),
            tries=0,
            next_try_at=others_from,
        )
    )
