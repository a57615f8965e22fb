"""`StreamSettings`: how a stream's events are served to its clients.

Every way of reading a stream is held to them: the SSE stream, its JSON pages, the legacy task
poll and the Socket.IO connections (a page there holds as much as here, and a connection may
have as many messages waiting as an SSE client).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import (
    DEFAULT_MAX_PAGE_BYTES,
    DEFAULT_PING_INTERVAL,
    DEFAULT_QUEUE_SIZE,
    check_count,
    check_seconds,
)


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """:param ping_interval: seconds between ``: ping`` comments on an SSE stream.
    :param queue_size: live events one client may have waiting before it is disconnected (an
        SSE client then resumes by cursor) or leaves its rooms (a Socket.IO connection catches
        up from the log once its client has read what it holds); the others never wait for it.
    :param max_page_bytes: how much of events' data (bytes of their JSON) one JSON page, legacy
        poll answer, SSE replay chunk or Socket.IO replay page holds at most, besides one event
        (a page always holds one, so a cursor always moves on).
    """

    ping_interval: float = DEFAULT_PING_INTERVAL
    queue_size: int = DEFAULT_QUEUE_SIZE
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES

    def __post_init__(self) -> None:
        check_seconds("StreamSettings.ping_interval", self.ping_interval)
        check_count("StreamSettings.queue_size", self.queue_size)
        check_count("StreamSettings.max_page_bytes", self.max_page_bytes)
