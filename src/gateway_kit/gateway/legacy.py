"""`LegacySurfaces`: which of the wrapped app's own paths the gateway answers instead of the app.

Outside its prefix the gateway changes nothing until the app's owner switches a surface over,
by name, here. Each surface answers the legacy clients from what the gateway owns, in the
shape they already read:

- ``tasks`` (``/api/tasks``): ``GET {path}/<task_id>``, the task poll, from the log, in the
  app's shape (``task_shape``); a task the log does not know still goes to the app;
- ``usage`` (``/api/usage``): the caller's usage totals, from the usage ledger;
- ``socket_token`` (``/api/socket-token``): a one-time socket ticket, in the legacy shape;
- ``approvals`` (``/api/plan-approvals/pending``): the caller's pending approvals, from the
  durable approvals;
- ``socketio`` (``/socket.io``): the gateway's Socket.IO server, admitting those tickets.

``csrf_token_route`` answers nothing: it is the app's own route that gives a page its CSRF
token, named in the gateway's messages to a client that sent none (unnamed otherwise).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..exceptions import SettingsError
from ..settings import normalize_path
from ..streams.task_shape import EXAMPLE_SHAPE, TaskPollShape

logger = logging.getLogger(__name__)

TAKEN = "gateway_kit answers %s instead of the app: %s (legacy surface %r)"
BAD_SHAPE = "LegacySurfaces(task_shape=...) must be a TaskPollShape, got {value!r}"
TWICE = "path {path!r} is given to two legacy surfaces: {first} and {second}"
UNDER_PREFIX = "legacy surface {name} ({path!r}) is under the gateway's own prefix {prefix!r}"

# What each surface answers, as the start-up log says it.
ANSWERS = {
    "tasks": "the task poll, from the log",
    "usage": "the caller's usage totals",
    "socket_token": "one-time socket tickets",
    "approvals": "the caller's pending approvals",
    "socketio": "Socket.IO, served by the gateway",
}
PATHS = tuple(ANSWERS)


@dataclass(frozen=True, slots=True)
class LegacySurfaces:
    """The app's paths the gateway answers (None: the app answers, as without the gateway).

    :param tasks: where the app's task poll lives (``GET {tasks}/<task_id>``).
    :param task_shape: how that poll's answers look (`TaskPollShape`); the example app's by
        default.
    :param usage: where the app's usage endpoint lives.
    :param socket_token: where the app's socket-token endpoint lives.
    :param approvals: where the app's pending-approvals list lives.
    :param socketio: where the app's clients connect to Socket.IO.
    :param csrf_token_route: the app's route that gives a page its CSRF token, named in the
        gateway's messages about a missing token.
    """

    tasks: str | None = None
    task_shape: TaskPollShape = field(default=EXAMPLE_SHAPE)
    usage: str | None = None
    socket_token: str | None = None
    approvals: str | None = None
    socketio: str | None = None
    csrf_token_route: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.task_shape, TaskPollShape):
            raise SettingsError(BAD_SHAPE.format(value=self.task_shape))
        seen: dict[str, str] = {}
        for name in (*PATHS, "csrf_token_route"):
            value = getattr(self, name)
            if value is None:
                continue
            path = normalize_path(f"legacy {name}", value, example=f"/api/{name}")
            object.__setattr__(self, name, path)
            if name in PATHS and path in seen:
                raise SettingsError(TWICE.format(path=path, first=seen[path], second=name))
            seen[path] = name

    @classmethod
    def example(cls) -> LegacySurfaces:
        """Every surface, at the example app's paths (what ``gateway-kit demo`` switches on)."""
        return cls(
            tasks="/api/tasks",
            usage="/api/usage",
            socket_token="/api/socket-token",
            approvals="/api/plan-approvals/pending",
            socketio="/socket.io",
            csrf_token_route="/api/csrf-token",
        )

    def taken(self) -> list[tuple[str, str]]:
        """(surface, path) of each surface switched on."""
        return [(name, getattr(self, name)) for name in PATHS if getattr(self, name) is not None]

    def check_outside(self, prefix: str) -> None:
        """`SettingsError` for a surface under the gateway's own prefix."""
        for name, path in self.taken():
            if path == prefix or path.startswith(prefix + "/"):
                raise SettingsError(UNDER_PREFIX.format(name=name, path=path, prefix=prefix))

    def log_taken(self) -> None:
        """One line per path the gateway answers instead of the app."""
        for name, path in self.taken():
            shown = f"{path}/<task_id>" if name == "tasks" else path
            logger.info(TAKEN, shown, ANSWERS[name], name)
