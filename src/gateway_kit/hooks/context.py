"""`PluginContext`: what a gateway hands each plugin with its settings, so that a plugin can
keep its own objects on the gateway's log and read the wrapped app's configuration."""

from __future__ import annotations

from dataclasses import dataclass

from ..log import EventLog


@dataclass(frozen=True, slots=True)
class PluginContext:
    """:param log: the gateway's event log (its database holds the tables beside the log).
    :param app: the wrapped application as it was given (a Flask app, an ASGI app), or None.
    :param prefix: where the gateway's own routes live.
    """

    log: EventLog | None = None
    app: object | None = None
    prefix: str = "/gateway"
