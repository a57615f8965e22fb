"""`DecisionLog`: every heartbeat decision with its reason and evidence, so that an operator
can see why a nudge was or was not sent.

A scheduler asks every few minutes, and a session idle for a day is asked hundreds of times
the same way: a decision equal to the newest one of its session (the same decision, reason,
state and decider) updates that row (its latest time, detail and evidence, and `repeats`)
instead of adding one, and each session keeps its newest `MAX_KEPT` rows at most.
"""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa

from ..log import EventLog
from .tables import decisions, nth_newest_of_session

MAX_LISTED = 500
MAX_KEPT = MAX_LISTED
SAME = ("decision", "reason", "state", "decided_by")

RECENT = (
    sa.select(decisions)
    .where(decisions.c.tmux_session == sa.bindparam("tmux_session"))
    .order_by(decisions.c.id.desc())
    .limit(sa.bindparam("limit"))
)
NEWEST = (
    sa.select(decisions.c.id, *(decisions.c[name] for name in SAME))
    .where(decisions.c.tmux_session == sa.bindparam("tmux_session"))
    .order_by(decisions.c.id.desc())
    .limit(1)
)
# The id is the database's own: the statement names every other column.
ADD = decisions.insert().values(
    {column.name: sa.bindparam(column.name) for column in decisions.columns if column.name != "id"}
)
REPEATED = (
    decisions.update()
    .where(decisions.c.id == sa.bindparam("row_id"))
    .values(
        decided_at=sa.bindparam("decided_at"),
        detail=sa.bindparam("detail"),
        evidence=sa.bindparam("evidence"),
        repeats=decisions.c.repeats + 1,
    )
)


def trim(keep: int) -> sa.Executable:
    """Of a session, delete the rows older than its newest `keep`."""
    return decisions.delete().where(
        decisions.c.tmux_session == sa.bindparam("tmux_session"),
        decisions.c.id < nth_newest_of_session(decisions.c.id, keep),
    )


PRUNE = decisions.delete().where(decisions.c.decided_at < sa.bindparam("before"))


class DecisionLog:
    """:param keep: the decisions kept per session, the newest."""

    def __init__(self, log: EventLog, *, keep: int = MAX_KEPT) -> None:
        self.log = log
        self.keep = keep
        self._trim = trim(keep)

    def add(self, document: dict[str, Any]) -> None:
        """Record one decision, as `HeartbeatDecision.as_json` gives it."""
        session = document["tmux_session_id"]
        row = {
            "tmux_session": session,
            "decided_at": document["decided_at"],
            "decision": document["decision"],
            "reason": document["reason"],
            "state": document["state"],
            "decided_by": document["decided_by"],
            "detail": document["detail"],
            "evidence": orjson.dumps(document["evidence"]).decode(),
        }
        with self.log.tables.transaction() as conn:
            newest = conn.execute(NEWEST, {"tmux_session": session}).first()
            if newest is not None and all(getattr(newest, name) == row[name] for name in SAME):
                conn.execute(REPEATED, {**row, "row_id": newest.id})
                return
            conn.execute(ADD, {**row, "since": row["decided_at"], "repeats": 1})
            conn.execute(self._trim, {"tmux_session": session})

    def recent(self, tmux_session: str, limit: int = 50) -> list[dict[str, Any]]:
        """The newest decisions about `tmux_session`, newest first."""
        params = {"tmux_session": tmux_session, "limit": min(limit, MAX_LISTED)}
        return [
            {
                "tmux_session_id": row.tmux_session,
                "decided_at": row.decided_at,
                "decision": row.decision,
                "reason": row.reason,
                "state": row.state,
                "decided_by": row.decided_by,
                "detail": row.detail,
                "evidence": orjson.loads(row.evidence),
                "since": row.decided_at if row.since is None else row.since,
                "repeats": row.repeats,
            }
            for row in self.log.tables.select(RECENT, params)
        ]

    def prune(self, before: float) -> None:
        self.log.tables.write(PRUNE, {"before": before})
