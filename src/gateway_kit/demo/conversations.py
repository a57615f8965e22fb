"""Whose conversation the demo writes to: a user's own, or a new one that becomes theirs."""

from __future__ import annotations

from ..identity.owners import StreamOwners
from ..log import EventLog


def may_write(log: EventLog, conversation_id: str, user: str) -> bool:
    """Whether `user` may write to the conversation: theirs, or new (then it becomes theirs).
    A conversation with events and no owner was written for someone else: never taken here."""
    owners = StreamOwners(log)
    owner = owners.owner(conversation_id)
    if owner is None and not owners.written(conversation_id):
        owner = owners.declare(conversation_id, user)
    return owner == user
