"""What settings share: the database URL, the defaults more than one part uses, the checks.

The database URL comes from the caller (``--db``, ``EventLog(url)``), else from the environment
variable `DATABASE_URL_VAR`, else `DEFAULT_DATABASE_URL`. A `Gateway`'s tunables are
`gateway_kit.gateway.settings.GatewaySettings`, one options object per part, each defined beside
its part and checked with the helpers here: a value that cannot work is refused at start-up with
a `SettingsError` that names the setting, never discovered later by a request.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

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
DEFAULT_PUMP_SCAN_INTERVAL = 2.0
DEFAULT_OWNED_RUN_SWEEP_INTERVAL = 2.0
DEFAULT_WORKING_DIR = "."
DEFAULT_TICKET_TTL = 30.0
DEFAULT_TICKET_RATE = (20, 10.0)  # tickets per credential, per seconds
DEFAULT_LEGACY_USAGE_PATH = "/api/usage"
DEFAULT_APPROVAL_EXPIRY = 900.0  # seconds a pending approval waits before it is denied
DEFAULT_REDIS_CHANNEL = "gateway-kit-socketio"  # one per deployment on a shared Redis
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


def normalize_path(name: str, value: object, *, example: str) -> str:
    """A mount path without its trailing slash; `SettingsError` unless it starts with '/'."""
    if not isinstance(value, str) or not value.startswith("/") or not value.strip("/"):
        raise SettingsError(BAD_PATH.format(name=name, example=example, value=value))
    return value.rstrip("/")
