"""Which tmux session a request of the wrapped app belongs to: its header, else the legacy
session metadata.

- The header ``X-Tmux-Session-Id`` (the setting ``header``), which agents' clients send with
  each request.
- Else the conversation (stream) the request names, by the legacy clients' own session
  metadata: the header ``X-Session-Id`` or ``X-Conversation-Id``, or the query parameter
  ``session_id`` or ``conversation_id`` (the settings ``session_headers`` and
  ``session_params``), when that stream is bound to a tmux session (a run of it was started
  for one). The bindings are read from memory, refreshed every few seconds from the
  database: this hook is asked in the event loop for every request.

Settings (``plugin_config={"tmux_session_resolver": {...}}``): ``enabled`` (default true),
``header``, ``session_headers``, ``session_params``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway_kit import hookimpl
from gateway_kit.bindings.names import is_tmux_session_id
from gateway_kit.bindings.tmux_sessions import TmuxBindings, bindings_of
from gateway_kit.hooks import PluginContext
from gateway_kit.http.request import query_params
from gateway_kit.types import Scope

from .settings import check_known, flag, word

DEFAULT_HEADER = "X-Tmux-Session-Id"
DEFAULT_SESSION_HEADERS = ("X-Session-Id", "X-Conversation-Id")
DEFAULT_SESSION_PARAMS = ("session_id", "conversation_id")


def words(config: Mapping[str, Any], name: str, default: Sequence[str]) -> tuple[str, ...]:
    value = config.get(name, default)
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a list of names, got {value!r}")
    return tuple(word({name: item}, name, "") for item in value)


class TmuxSessionResolver:
    def __init__(self) -> None:
        self.enabled = True
        self.header = DEFAULT_HEADER.lower().encode()
        self.session_headers = tuple(h.lower().encode() for h in DEFAULT_SESSION_HEADERS)
        self.session_params: tuple[str, ...] = DEFAULT_SESSION_PARAMS
        self.bindings: TmuxBindings | None = None

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        check_known(config, {"enabled", "header", "session_headers", "session_params"})
        self.enabled = flag(config, "enabled", True)
        self.header = word(config, "header", DEFAULT_HEADER).lower().encode("latin-1")
        headers = words(config, "session_headers", DEFAULT_SESSION_HEADERS)
        self.session_headers = tuple(h.lower().encode("latin-1") for h in headers)
        self.session_params = words(config, "session_params", DEFAULT_SESSION_PARAMS)
        self.bindings = None if context.log is None else bindings_of(context.log)

    @hookimpl(trylast=True)
    def resolve_tmux_session(self, scope: Scope) -> str | None:
        if not self.enabled:
            return None
        stream = None
        for name, value in scope.get("headers") or ():
            if name == self.header:
                tmux_session = value.decode("latin-1")
                return tmux_session if is_tmux_session_id(tmux_session) else None
            if stream is None and name in self.session_headers:
                stream = value.decode("latin-1")
        if self.bindings is None:
            return None
        if stream is None and scope.get("query_string"):
            query = query_params(scope)
            stream = next((query[p] for p in self.session_params if p in query), None)
        return None if stream is None else self.bindings.cached(stream)
