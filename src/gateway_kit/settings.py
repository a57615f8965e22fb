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
DEFAULT_PLUGIN_TIMEOUT = 5.0
DEFAULT_PUMP_SCAN_INTERVAL = 2.0
DEFAULT_OWNED_RUN_SWEEP_INTERVAL = 2.0
DEFAULT_WORKING_DIR = "."
DEFAULT_TICKET_TTL = 30.0
DEFAULT_TICKET_RATE = (20, 10.0)  # tickets per credential, per seconds
DEFAULT_LEGACY_SOCKET_TOKEN_PATH = "/api/socket-token"
BAD_TICKET_RATE = (
    "ticket_rate must be (a positive number of tickets, a positive number of seconds), "
    "got {value!r}"
)
BAD_ORIGINS = (
    "socket_origins must be None or a list of origins such as 'https://app.example.com', "
    "got {value!r}"
)

BAD_PATH = "{name} must start with '/' and name a path, such as {example!r}; got {value!r}"
NOT_POSITIVE_NUMBER = "{name} must be a positive number of seconds, got {value!r}"
NOT_POSITIVE_INTEGER = "{name} must be a positive integer, got {value!r}"


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


def _positive_number(name: str, value: object) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and value > 0):  # type: ignore[arg-type,operator]
        raise SettingsError(NOT_POSITIVE_NUMBER.format(name=name, value=value))


def _positive_integer(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SettingsError(NOT_POSITIVE_INTEGER.format(name=name, value=value))


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
    """The tunables of a `Gateway`, checked when it is made (see `Gateway` for each one)."""

    prefix: str = DEFAULT_PREFIX
    legacy_tasks_path: str | None = DEFAULT_LEGACY_TASKS_PATH
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
    legacy_socket_token_path: str | None = DEFAULT_LEGACY_SOCKET_TOKEN_PATH
    socket_origins: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalised values are set once, here
        set_(self, "prefix", normalize_path("prefix", self.prefix, example=DEFAULT_PREFIX))
        if self.legacy_tasks_path is not None:
            path = normalize_path(
                "legacy_tasks_path", self.legacy_tasks_path, example=DEFAULT_LEGACY_TASKS_PATH
            )
            set_(self, "legacy_tasks_path", path)
        for name in ("wsgi_workers", "queue_size", "max_body_bytes"):
            _positive_integer(name, getattr(self, name))
        for name in (
            "ping_interval",
            "send_timeout",
            "plugin_timeout",
            "pump_scan_interval",
            "owned_run_sweep_interval",
        ):
            _positive_number(name, getattr(self, name))
        if not isinstance(self.working_dir, str) or not self.working_dir:
            raise SettingsError(f"working_dir must be a non-empty path, got {self.working_dir!r}")
        _positive_number("ticket_ttl", self.ticket_ttl)
        rate = self.ticket_rate
        try:
            count, seconds = rate
            _positive_integer("ticket_rate", count)
            _positive_number("ticket_rate", seconds)
        except (TypeError, ValueError, SettingsError):
            raise SettingsError(BAD_TICKET_RATE.format(value=rate)) from None
        set_(self, "ticket_rate", (count, float(seconds)))
        if self.legacy_socket_token_path is not None:
            path = normalize_path(
                "legacy_socket_token_path",
                self.legacy_socket_token_path,
                example=DEFAULT_LEGACY_SOCKET_TOKEN_PATH,
            )
            set_(self, "legacy_socket_token_path", path)
        origins = self.socket_origins
        if origins is not None:
            if isinstance(origins, str) or not all(_origin(o) for o in origins):
                raise SettingsError(BAD_ORIGINS.format(value=origins))
            set_(self, "socket_origins", tuple(origins))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
