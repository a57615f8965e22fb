"""Principals from the legacy Flask app's session cookie (method ``cookie``).

The cookie is read as Flask reads it (`gateway_kit.identity.FlaskSessionReader`), with the
wrapped Flask app's ``SECRET_KEY``, ``SECRET_KEY_FALLBACKS``, cookie name and lifetime, or with
this plugin's settings (``Gateway(plugin_config={"flask_session_identity": {...}})``: any field
of `FlaskSessionSettings`). The principal's CSRF token is the session's, which unsafe requests
to the gateway must send back. A request that carries an ``Authorization`` header is left to the
resolvers of that header, and a login that was logged out is refused (checked from memory, or
from the database for a login memory holds no answer for, `gateway_kit.identity.credentials`:
`DatabaseUnavailable` when that could not be read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway_kit import Principal, hookimpl
from gateway_kit.hooks import PluginContext
from gateway_kit.identity.flask_session import FlaskSessionReader, FlaskSessionSettings
from gateway_kit.identity.logins import EndedLogins
from gateway_kit.principal import COOKIE_METHOD
from gateway_kit.types import Scope


class FlaskSessionIdentity:
    def __init__(self) -> None:
        self.reader: FlaskSessionReader | None = None
        self.ended: EndedLogins | None = None

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        app: Any = context.app
        flask = hasattr(app, "config") and hasattr(app, "session_interface")
        if flask and (config.get("secret_key") or app.config.get("SECRET_KEY")):
            settings = FlaskSessionSettings.from_app(app, **config)
        elif config.get("secret_key"):
            settings = FlaskSessionSettings(**config)
        else:
            return  # no key: the app keeps no session, there is no cookie to read
        self.reader = FlaskSessionReader(settings)
        if context.log is not None:
            self.ended = EndedLogins(context.log, max_age=settings.max_age)

    @hookimpl(trylast=True)
    def cookie_logins(self) -> tuple[FlaskSessionReader, EndedLogins] | None:
        if self.reader is None or self.ended is None:
            return None
        return self.reader, self.ended

    @hookimpl(trylast=True)
    def resolve_principal(self, scope: Scope) -> Principal | None:
        if self.reader is None:
            return None
        cookies = []
        for name, value in scope.get("headers", ()):
            if name == b"cookie":  # HTTP/2 may split the cookies over several headers
                cookies.append(bytes(value).decode("latin-1"))
        login = self.reader.login("; ".join(cookies))
        if login is None:
            return None
        # A login without a nonce of its own is every login of the user: a cookie signed
        # after it last ended is of a later login.
        since = None if login.per_login else login.signed_at
        if self.ended is not None and self.ended.ended(login.credential_id, since):
            return None
        return Principal(
            user_id=login.user_id,
            method=COOKIE_METHOD,
            credential_id=login.credential_id,
            csrf_token=login.csrf_token,
        )
