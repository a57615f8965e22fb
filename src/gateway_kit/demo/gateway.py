"""The example app wrapped by `Gateway`, its task events in the log, its runs on a simulated goose.

``gateway-kit serve gateway_kit.demo.gateway:app`` serves it over the log at ``$GATEWAY_KIT_DB``
(``serve --db URL`` sets that variable, also for every worker process); `build_demo` is what
`gateway-kit demo` runs. The simulated goose lives in the serving process, so goose runs need a
single worker: each worker process would have a goose of its own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..bindings.tables import sessions
from ..gateway import Gateway, LegacySurfaces
from ..log import EventLog
from ..settings import database_url
from ..types import Message, Receive, Scope, Send
from .app import create_app
from .goose import TYPING_DELAY, SimulatedGoose
from .secret import database_key


class DemoApp:
    """The demo's ASGI app: the gateway, and the simulated goose that lives as long as it."""

    def __init__(self, gateway: Gateway, goose: SimulatedGoose) -> None:
        self.gateway = gateway
        self.goose = goose

    @property
    def log(self) -> EventLog:
        return self.gateway.log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.gateway(scope, receive, send)
            return

        async def stop_goose_then_send(message: Message) -> None:
            # The gateway answers the shutdown once its pumps have stopped reading goose.
            if message["type"] == "lifespan.shutdown.complete":
                await self.goose.aclose()
            await send(message)

        await self.gateway(scope, receive, stop_goose_then_send)


def bound_session_ids(log: EventLog) -> list[str]:
    """The goose sessions the log's streams are bound to (by earlier runs of the demo)."""
    return [row.session_id for row in log.tables.select(sa.select(sessions.c.session_id))]


def demo_public_root(db_url: str) -> str:
    """Where the demo's agents publish pages, a folder per user (``{user_id}`` is filled per
    run): beside its SQLite file, else in the temp dir. Each user's folder is named ``public``,
    as the paths agents write are (``…/public/NAME.html``)."""
    url = sa.engine.make_url(db_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        folder = Path(url.database).resolve().parent
    else:
        folder = Path(tempfile.gettempdir())
    return str(folder / "gateway-demo-pages" / "{user_id}" / "public")


def build_demo(
    db_url: str,
    config: Mapping[str, Any] | None = None,
    *,
    goose: SimulatedGoose | None = None,
    typing_delay: float = TYPING_DELAY,
    anonymous: bool = False,
    public_root: str | None = None,
) -> DemoApp:
    """The example Flask app (with `config`) writing its events to the log at `db_url`, and its
    goose runs going to `goose`: by default a `SimulatedGoose` that knows the log's sessions and
    waits `typing_delay` seconds between chunks. Its users log in (the app's session cookie,
    signed with the database's own key unless configured); `anonymous` serves requests without
    credentials too. Pages its agents publish go to `public_root`, a path whose ``{user_id}``
    is filled per user (`demo_public_root` by default), which ``publish_guard`` checks."""
    log = EventLog(db_url)
    try:
        goose = goose or SimulatedGoose(bound_session_ids(log), typing_delay=typing_delay)
    except BaseException:
        log.close()
        raise
    try:
        # A key of this database's, so that every worker signs alike and restarts keep logins.
        flask_app = create_app({"SECRET_KEY": database_key(log), **(config or {})})
    except BaseException:
        log.close()
        raise
    flask_app.config["EVENT_LOG"] = log  # step 2 of adopting gateway_kit: events go to the log
    pages = public_root or demo_public_root(db_url)
    if flask_app.config.get("PUBLIC_ROOT") is None:
        flask_app.config["PUBLIC_ROOT"] = pages  # where the legacy tasks' fake agent writes
    gateway = Gateway(
        flask_app,
        log=log,
        upstream=goose.upstream,
        allow_anonymous=anonymous,
        # The example app's legacy clients, unmodified, are answered by the gateway: the task
        # poll from the log, socket tokens, usage, pending approvals, and its Socket.IO path
        # (served in the event loop, not in Flask's threads).
        legacy=LegacySurfaces.example(),
        # A run that says it published a page gets follow-ups until the page is on disk.
        plugin_config={"publish_guard": {"public_root": flask_app.config["PUBLIC_ROOT"]}},
    )
    # The tasks' runs are held to the gateway's finish guards, as its own runs are.
    flask_app.config["RUN_GUARDS"] = gateway.run_guards
    return DemoApp(gateway, goose)


def build_gateway(db_url: str, config: Mapping[str, Any] | None = None) -> Gateway:
    """The demo's `Gateway` alone (its simulated goose stops with the event loop)."""
    return build_demo(db_url, config).gateway


def __getattr__(name: str) -> Any:
    # `app` is built on first use, so importing this module opens no database.
    if name == "app":
        gateway = build_gateway(database_url())
        globals()["app"] = gateway
        return gateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
