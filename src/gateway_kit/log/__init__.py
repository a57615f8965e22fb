"""The durable event log: global seq, per-stream pos, resumable by cursor."""

from .event import Event
from .eventlog import EventLog

__all__ = ["Event", "EventLog"]
