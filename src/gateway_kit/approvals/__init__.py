"""Durable approvals: the confirmations goose waits for, owned by the gateway.

goose asks (`goose_actions`), the session pump's watcher records one approval per invocation
(`watch`), people claim and decide over HTTP (`routes`) through the service (`service`), the
answer goes to goose until goose shows it arrived (`delivery`), and every change is one
transaction of the row, its audit entry and the stream's event (`store`).
"""

from __future__ import annotations

from .events import EVENT_TYPES
from .model import Approval, Kind, Status, args_hash
from .service import ApprovalService
from .settings import ApprovalSettings
from .store import ApprovalStore, AuditEntry

__all__ = [
    "EVENT_TYPES",
    "Approval",
    "ApprovalService",
    "ApprovalSettings",
    "ApprovalStore",
    "AuditEntry",
    "Kind",
    "Status",
    "args_hash",
]
