"""Every setting of gateway_kit in one place: its default, where it comes from, how it is checked.

The database URL comes from the caller (``--db``, ``EventLog(url)``), else from the environment
variable `DATABASE_URL_VAR`, else `DEFAULT_DATABASE_URL`. `GatewaySettings` holds the tunables of
a `Gateway`; a value that cannot work is refused at start-up with a `SettingsError` that names
the setting, never discovered later by a request.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from .exceptions import SettingsError

DATABASE_URL_VAR = "GATEWAY_KIT_DB"
DEFAULT_DATABASE_URL = "sqlite:///gateway.db"
DATABASE_SCHEMES = ("sqlite", "postgresql", "postgres")  # postgres:// as libpq and Heroku write it
BAD_DATABASE_URL = (
    "{source}: {url!r} is not a database URL gateway_kit can use; "
    "use sqlite:///PATH or postgresql+psycopg://USER@HOST/DATABASE"
)

DEFAULT_PREFIX = "/gateway"
DEFAULT_LEGACY_TASKS_PATH = "/api/tasks"
DEFAULT_WSGI_WORKERS = 10
DEFAULT_PING_INTERVAL = 15.0
DEFAULT_SEND_TIMEOUT = 30.0
DEFAULT_QUEUE_SIZE = 1024
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
# What one page or replay chunk may hold of events' data: a server's memory follows clients
# times this, whatever the size of the events.
DEFAULT_MAX_PAGE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024  # a run's message, UTF-8
DEFAULT_PLUGIN_TIMEOUT = 5.0
DEFAULT_PLUGIN_HUNG_LIMIT = 32  # calls one plugin may have past their timeout, still running
DEFAULT_BODY_TIMEOUT = 60.0
LEGACY_SOCKETIO_EXAMPLE = "/socket.io"
DEFAULT_PUMP_SCAN_INTERVAL = 2.0
DEFAULT_OWNED_RUN_SWEEP_INTERVAL = 2.0
DEFAULT_WORKING_DIR = "."
DEFAULT_TICKET_TTL = 30.0
DEFAULT_TICKET_RATE = (20, 10.0)  # tickets per credential, per seconds
DEFAULT_LEGACY_SOCKET_TOKEN_PATH = "/api/socket-token"
DEFAULT_LEGACY_USAGE_PATH = "/api/usage"
DEFAULT_LEGACY_APPROVALS_PATH = "/api/plan-approvals/pending"
DEFAULT_APPROVAL_EXPIRY = 900.0  # seconds a pending approval waits before it is denied
DEFAULT_REDIS_CHANNEL = "gateway-kit-socketio"  # one per deployment on a shared Redis
BAD_REDIS_URL = "socketio_redis_url must be None or a Redis URL (redis://...), got {value!r}"
BAD_REDIS_CHANNEL = "socketio_redis_channel must be a non-empty string, got {value!r}"
# goose answers `reply` at once and works in the background: a start waits this long at most.
DEFAULT_REPLY_TIMEOUT = 15.0
# After a cancel, goose's Finish is awaited this long; then the gateway ends the run itself.
DEFAULT_CANCEL_DEADLINE = 30.0
# A run still going this long is cancelled at goose and ended with an Error (inf: no limit).
DEFAULT_MAX_RUN_DURATION = 3600.0
# How often each process reads revoked tokens and ended logins (the bound on a revocation
# reaching it), and how long it may go without a read before credential checks fail closed.
DEFAULT_CREDENTIAL_REFRESH_INTERVAL = 0.5
DEFAULT_CREDENTIAL_STALE_AFTER = 10.0
BAD_CREDENTIAL_TIMINGS = (
    "credential_stale_after must be longer than credential_refresh_interval, got {stale!r} "
    "and {interval!r}"
)
BAD_TICKET_RATE = (
    "ticket_rate must be (a positive number of tickets, a positive number of seconds), "
    "got {value!r}"
)
BAD_ORIGINS = (
    "socket_origins must be None or a list of origins such as 'https://app.example.com', "
    "got {value!r}"
)

BAD_PATH = "{name} must start with '/' and name a path, such as {example!r}; got {value!r}"
# Every setting that must be positive, wherever it is checked, is refused in these words.
NOT_POSITIVE = "{name} must be a positive {kind}, got {value!r}"
SECONDS = "number of seconds"
SECONDS_OR_NO_LIMIT = "number of seconds (inf for no limit)"
INTEGER = "integer"


def database_url(
    url: str | None = None,
    *,
    source: str = "the database URL",
    environ: Mapping[str, str] = os.environ,
) -> str:
    """`url` if given, else ``$GATEWAY_KIT_DB``, else `DEFAULT_DATABASE_URL`; checked.

    `source` names where `url` came from (``--db``, ``EventLog(url)``) in the error.
    """
    if url is None or url == "":
        url, source = environ.get(DATABASE_URL_VAR) or "", f"${DATABASE_URL_VAR}"
        if not url:
            return DEFAULT_DATABASE_URL
    return check_database_url(url, source=source)


def check_database_url(url: object, *, source: str) -> str:
    if not isinstance(url, str):
        raise SettingsError(BAD_DATABASE_URL.format(source=source, url=url))
    scheme, sep, rest = url.partition("://")
    dialect = scheme.split("+", 1)[0]
    if not sep or dialect not in DATABASE_SCHEMES or (dialect != "sqlite" and not rest):
        raise SettingsError(BAD_DATABASE_URL.format(source=source, url=url))
    return url


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_seconds(name: str, value: object) -> None:
    """A positive, finite number of seconds; `SettingsError` naming the setting otherwise."""
    if not (_number(value) and math.isfinite(value) and value > 0):  # type: ignore[arg-type,operator]
        raise SettingsError(NOT_POSITIVE.format(name=name, kind=SECONDS, value=value))


def check_duration(name: str, value: object) -> None:
    """A positive number of seconds, or infinity for no limit."""
    if not (_number(value) and value > 0):  # type: ignore[operator]  # NaN fails this too
        raise SettingsError(NOT_POSITIVE.format(name=name, kind=SECONDS_OR_NO_LIMIT, value=value))


def check_count(name: str, value: object) -> None:
    """A positive integer; `SettingsError` naming the setting otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SettingsError(NOT_POSITIVE.format(name=name, kind=INTEGER, value=value))


def _origin(value: object) -> bool:
    return (
        isinstance(value, str)
        and value.startswith(("http://", "https://"))
        and "/" not in value.split("://", 1)[1]
    )


def normalize_path(name: str, value: object, *, example: str) -> str:
    """A mount path without its trailing slash; `SettingsError` unless it starts with '/'."""
    if not isinstance(value, str) or not value.startswith("/") or not value.strip("/"):
        raise SettingsError(BAD_PATH.format(name=name, example=example, value=value))
    return value.rstrip("/")


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """The tunables of a `Gateway`, checked when it is made (see `Gateway` for each one); which
    of the app's paths it answers is `gateway_kit.gateway.legacy.LegacySurfaces`."""

    prefix: str = DEFAULT_PREFIX
    wsgi_workers: int = DEFAULT_WSGI_WORKERS
    ping_interval: float = DEFAULT_PING_INTERVAL
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    queue_size: int = DEFAULT_QUEUE_SIZE
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    plugin_timeout: float = DEFAULT_PLUGIN_TIMEOUT
    pump_scan_interval: float = DEFAULT_PUMP_SCAN_INTERVAL
    owned_run_sweep_interval: float = DEFAULT_OWNED_RUN_SWEEP_INTERVAL
    working_dir: str = DEFAULT_WORKING_DIR
    ticket_ttl: float = DEFAULT_TICKET_TTL
    ticket_rate: tuple[int, float] = DEFAULT_TICKET_RATE
    socket_origins: tuple[str, ...] | None = None
    # None: as `lifecycle_settings` says (its defaults are the DEFAULT_* above).
    reply_timeout: float | None = None
    cancel_deadline: float | None = None
    max_run_duration: float | None = None
    plugin_hung_limit: int = DEFAULT_PLUGIN_HUNG_LIMIT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    credential_refresh_interval: float = DEFAULT_CREDENTIAL_REFRESH_INTERVAL
    credential_stale_after: float = DEFAULT_CREDENTIAL_STALE_AFTER
    socketio_redis_url: str | None = None
    socketio_redis_channel: str = DEFAULT_REDIS_CHANNEL
    approval_expiry: float = DEFAULT_APPROVAL_EXPIRY

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalised values are set once, here
        set_(self, "prefix", normalize_path("prefix", self.prefix, example=DEFAULT_PREFIX))
        for name in ("wsgi_workers", "queue_size", "max_body_bytes"):
            check_count(name, getattr(self, name))
        for name in (
            "ping_interval",
            "send_timeout",
            "plugin_timeout",
            "pump_scan_interval",
            "owned_run_sweep_interval",
            "approval_expiry",
        ):
            check_seconds(name, getattr(self, name))
        if not isinstance(self.working_dir, str) or not self.working_dir:
            raise SettingsError(f"working_dir must be a non-empty path, got {self.working_dir!r}")
        check_seconds("ticket_ttl", self.ticket_ttl)
        rate = self.ticket_rate
        try:
            count, seconds = rate
            check_count("ticket_rate", count)
            check_seconds("ticket_rate", seconds)
        except (TypeError, ValueError, SettingsError):
            raise SettingsError(BAD_TICKET_RATE.format(value=rate)) from None
        set_(self, "ticket_rate", (count, float(seconds)))
        origins = self.socket_origins
        if origins is not None:
            if isinstance(origins, str) or not all(_origin(o) for o in origins):
                raise SettingsError(BAD_ORIGINS.format(value=origins))
            set_(self, "socket_origins", tuple(origins))
        for name in ("reply_timeout", "cancel_deadline"):
            if getattr(self, name) is not None:
                check_seconds(name, getattr(self, name))
        if self.max_run_duration is not None:
            check_duration("max_run_duration", self.max_run_duration)
        check_count("plugin_hung_limit", self.plugin_hung_limit)
        check_seconds("body_timeout", self.body_timeout)
        for name in ("max_page_bytes", "max_message_bytes"):
            check_count(name, getattr(self, name))
        check_seconds("credential_refresh_interval", self.credential_refresh_interval)
        check_seconds("credential_stale_after", self.credential_stale_after)
        if self.credential_stale_after <= self.credential_refresh_interval:
            raise SettingsError(
                BAD_CREDENTIAL_TIMINGS.format(
                    stale=self.credential_stale_after, interval=self.credential_refresh_interval
                )
            )

        redis = self.socketio_redis_url
        if redis is not None and not (isinstance(redis, str) and redis):
            raise SettingsError(BAD_REDIS_URL.format(value=redis))
        channel = self.socketio_redis_channel
        if not isinstance(channel, str) or not channel:
            raise SettingsError(BAD_REDIS_CHANNEL.format(value=channel))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
