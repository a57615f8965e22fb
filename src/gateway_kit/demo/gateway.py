"""The example app wrapped by `Gateway`, its task events in the log.

``gateway-kit serve gateway_kit.demo.gateway:app`` serves it over the log at ``$GATEWAY_KIT_DB``
(``serve --db URL`` sets that variable, also for every worker process); `build_gateway` is what
`gateway-kit demo` runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..gateway import Gateway
from ..log import EventLog
from ..log.eventlog import DEFAULT_URL
from .app import create_app

DB_VAR = "GATEWAY_KIT_DB"


def build_gateway(db_url: str, config: Mapping[str, Any] | None = None) -> Gateway:
    """The example Flask app (with `config`) writing its events to the log at `db_url`."""
    log = EventLog(db_url)
    flask_app = create_app(config)
    flask_app.config["EVENT_LOG"] = log  # step 2 of adopting gateway_kit: events go to the log
    # Identity arrives in a later version; until then the demo's streams are open to anyone.
    return Gateway(flask_app, log=log, allow_anonymous=True)


def __getattr__(name: str) -> Any:
    # `app` is built on first use, so importing this module opens no database.
    if name == "app":
        gateway = build_gateway(os.environ.get(DB_VAR) or DEFAULT_URL)
        globals()["app"] = gateway
        return gateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
