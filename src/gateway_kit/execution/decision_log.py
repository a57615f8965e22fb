"""`DecisionLog`: every heartbeat decision with its reason and evidence, so that an operator
can see why a nudge was or was not sent."""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa

from ..log import EventLog
from .tables import decisions

MAX_LISTED = 500

RECENT = (
    sa.select(decisions)
    .where(decisions.c.tmux_session == sa.bindparam("tmux_session"))
    .order_by(decisions.c.id.desc())
    .limit(sa.bindparam("limit"))
)
# The id is the database's own: the statement names every other column.
ADD = decisions.insert().values(
    {column.name: sa.bindparam(column.name) for column in decisions.columns if column.name != "id"}
)
PRUNE = decisions.delete().where(decisions.c.decided_at < sa.bindparam("before"))


class DecisionLog:
    def __init__(self, log: EventLog) -> None:
        self.log = log

    def add(self, document: dict[str, Any]) -> None:
        """Record one decision, as `HeartbeatDecision.as_json` gives it."""
        self.log.tables.write(
            ADD,
            {
                "tmux_session": document["tmux_session_id"],
                "decided_at": document["decided_at"],
                "decision": document["decision"],
                "reason": document["reason"],
                "state": document["state"],
                "decided_by": document["decided_by"],
                "detail": document["detail"],
                "evidence": orjson.dumps(document["evidence"]).decode(),
            },
        )

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
            }
            for row in self.log.tables.select(RECENT, params)
        ]

    def prune(self, before: float) -> None:
        self.log.tables.write(PRUNE, {"before": before})
