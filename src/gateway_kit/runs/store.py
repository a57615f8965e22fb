"""Runs and stream → session bindings in the database, shared by every gateway process."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from ..exceptions import RunConflict
from .model import Run, RunStatus, SessionBinding
from .tables import runs, sessions


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
        try:
            with self.engine.begin() as conn:
                conn.execute(runs.insert().values(**values))
        except sa.exc.IntegrityError as exc:
            raise RunConflict(f"stream {run.stream!r} already has an active run") from exc
        return run

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
        return next(iter(self._select(runs.c.upstream_request_id == request_id)), None)

    def end(self, run_id: str, status: RunStatus) -> bool:
        """Move an active run to `status`; False when it had already ended."""
        with self.engine.begin() as conn:
            result = conn.execute(
                runs.update()
                .where(runs.c.run_id == run_id)
                .where(runs.c.status == RunStatus.ACTIVE.value)
                .values(status=status.value, finished_at=time.time())
            )
        return bool(result.rowcount)

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
