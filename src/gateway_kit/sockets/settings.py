"""`SocketSettings`: who may open a Socket.IO connection, and how processes share its state.

How much a connection may hold and how long its writes may take are the streams' and HTTP's
settings (`StreamSettings.queue_size`, ``max_page_bytes``, `HttpSettings.send_timeout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..exceptions import SettingsError
from ..settings import DEFAULT_REDIS_CHANNEL

BAD_ORIGINS = (
    "SocketSettings.origins must be None or a list of origins such as "
    "'https://app.example.com', got {value!r}"
)
BAD_REDIS_URL = "SocketSettings.redis_url must be None or a Redis URL (redis://...), got {value!r}"
BAD_REDIS_CHANNEL = "SocketSettings.redis_channel must be a non-empty string, got {value!r}"


def is_origin(value: object) -> bool:
    """A scheme and a host (and port), nothing after: ``https://app.example.com``."""
    return (
        isinstance(value, str)
        and value.startswith(("http://", "https://"))
        and "/" not in value.split("://", 1)[1]
    )


@dataclass(frozen=True, slots=True)
class SocketSettings:
    """:param origins: the browser origins allowed to open a Socket.IO connection; None allows
        the gateway's own origin only.
    :param redis_url: a Redis server through which several gateway processes share Socket.IO's
        state (python-socketio's Redis manager); None for one process.
    :param redis_channel: the Redis channel those processes share (one per deployment on a
        shared Redis).
    """

    origins: Sequence[str] | None = None
    redis_url: str | None = None
    redis_channel: str = DEFAULT_REDIS_CHANNEL

    def __post_init__(self) -> None:
        origins = self.origins
        if origins is not None:
            if isinstance(origins, str) or not all(is_origin(o) for o in origins):
                raise SettingsError(BAD_ORIGINS.format(value=origins))
            object.__setattr__(self, "origins", tuple(origins))  # frozen: set once
        redis = self.redis_url
        if redis is not None and not (isinstance(redis, str) and redis):
            raise SettingsError(BAD_REDIS_URL.format(value=redis))
        channel = self.redis_channel
        if not isinstance(channel, str) or not channel:
            raise SettingsError(BAD_REDIS_CHANNEL.format(value=channel))
