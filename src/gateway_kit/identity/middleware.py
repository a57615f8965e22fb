"""`IdentityMiddleware`: the first part of the stack, which gives every request its principal.

The `resolve_principal` hooks are asked in turn; the first `Principal` one answers goes into the
scope (``scope["gateway_kit.principal"]``, read with `gateway_kit.principal.principal_of`; a WSGI
app finds it in its environ under the same key) for every part below. What is refused here:

- on the gateway's own paths (`own_paths`: its prefix), a resolver that fails (raises, answers
  nonsense, takes too long): 401;
- a resolver the gateway cannot ask (no identity thread was free within the plugin timeout,
  or the resolver has too many calls hung): 503 ``plugin_unavailable`` with ``Retry-After``,
  whatever the path (the wrapped app's included). That is no verdict on the credentials, so a
  client retries instead of logging out; and since a call is timed from when it is asked for,
  no request waits on identity much longer than the plugin timeout;
- on those paths, a Bearer ``Authorization`` header that no resolver accepts: 401, never a
  fallback to the cookie (a client that sends a token means that token); a header of another
  scheme (Basic) is no credential for the gateway;
- an unsafe request (POST, PUT, PATCH, DELETE) to a CSRF-protected path from a principal a
  browser sends by itself (a cookie) without that principal's CSRF token in the
  ``X-CSRF-Token`` header: 403.

Every request is asked about, the wrapped app's own included: the app finds the principal in
its environ, and its responses are watched for a logout of the principal's login. On the app's
own paths the gateway refuses nothing: an ``Authorization`` header it does not recognize (the
app's own Bearer tokens, ``X-Api-Key`` schemes, a revoked token of the gateway's) reaches the
app untouched, and the request goes on with what was resolved beside it (a cookie's principal)
or without a principal, as the app alone would get it. A request nobody answers for goes on
without a principal (the wrapped app serves its login page); the gateway's routes then answer
401. With ``allow_anonymous`` it goes on as the
``anonymous`` principal instead. A refused websocket handshake is closed before it is accepted.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Sequence

from ..exceptions import PluginUnavailable
from ..hooks import Plugins
from ..hooks.policy import Refused
from ..http.errors import UNAUTHENTICATED, send_error
from ..http.request import header, relative_path
from ..http.unavailable import refuse_unavailable
from ..principal import ANONYMOUS, PRINCIPAL_KEY, Principal
from ..types import ASGIApp, Message, Receive, Scope, Send
from .flask_session import FlaskSessionReader
from .logins import EndedLogins
from .logout import login_ended

REFUSED_MESSAGE = "the request's credentials could not be checked; try again or log in again"
BAD_AUTHORIZATION = "the Authorization header holds no valid credential"
CSRF_FAILED = "csrf_failed"
CSRF_MESSAGE = "this request needs the session's CSRF token in the X-CSRF-Token header"
# Said after the message when the app's route that gives a page its token is known.
CSRF_ROUTE = " (GET {route} gives it)"
CSRF_HEADER = b"x-csrf-token"
AUTHORIZATION = b"authorization"
BEARER_SCHEME = "bearer"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def refusal(message: str) -> dict[str, object]:
    # Closing before accepting makes the server refuse the handshake (HTTP 403).
    return {"type": "websocket.close", "code": 1008, "reason": message}


class IdentityMiddleware:
    """:param plugins: whose `resolve_principal` hooks to ask.
    :param allow_anonymous: give a request nobody answers for the ``anonymous`` principal.
    :param csrf_paths: path prefixes whose unsafe requests need a browser principal's CSRF
        token (the gateway's own routes; the wrapped app keeps its own protection).
    :param csrf_exempt: path prefixes inside those that need none (the Socket.IO endpoint,
        which admits by ticket, not by cookie).
    :param logins: where the wrapped Flask app's cookie logins are read (a
        `FlaskSessionReader`) and where ended ones are noted (`EndedLogins`): a response that
        logs a cookie principal out ends its login. None: logouts are not watched.
    :param own_paths: path prefixes the gateway answers, where credentials it cannot accept
        are refused; None: every path (the middleware alone, in front of the gateway's parts).
    :param answered_paths: the app's paths the gateway answers in the app's stead (its legacy
        surfaces): a Bearer header no resolver accepts makes the request no one's there, never
        the cookie's beside it, and the surface answers as its app did without credentials.
    :param csrf_token_route: the app's route that gives a page its CSRF token, named in the
        answer to a request without one; None names none.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        plugins: Plugins,
        allow_anonymous: bool = False,
        csrf_paths: Sequence[str] = (),
        csrf_exempt: Sequence[str] = (),
        logins: tuple[FlaskSessionReader, EndedLogins] | None = None,
        own_paths: Sequence[str] | None = None,
        answered_paths: Sequence[str] = (),
        csrf_token_route: str | None = None,
    ) -> None:
        self.app = app
        self.plugins = plugins
        self.allow_anonymous = allow_anonymous
        self.csrf_paths = tuple(csrf_paths)
        self.csrf_exempt = tuple(csrf_exempt)
        self.logins = logins
        self.own_paths = None if own_paths is None else tuple(own_paths)
        self.answered_paths = tuple(answered_paths)
        self.csrf_message = CSRF_MESSAGE + (
            CSRF_ROUTE.format(route=csrf_token_route) if csrf_token_route else ""
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        try:
            answer = await self.plugins.resolve_principal(scope)
        except PluginUnavailable as exc:
            await refuse_unavailable(scope, send, exc)
            return
        own = self.own_paths is None or _under(relative_path(scope), self.own_paths)
        if isinstance(answer, Refused):
            if own:
                await self.refuse(kind, send, 401, UNAUTHENTICATED, REFUSED_MESSAGE)
                return
            # The app's path: the app judges its own credentials, with nobody vouched for.
            scope.pop(PRINCIPAL_KEY, None)
            await self.app(scope, receive, send)
            return
        # A Bearer token no resolver took is never passed over for the cookie a browser sent
        # beside it, whichever resolver read that cookie. Other schemes (Basic, another
        # app's own) are the wrapped app's business: to the gateway they are no credential.
        untaken = (answer is None or answer.sent_by_browser) and _bearer(
            header(scope, AUTHORIZATION)
        )
        if untaken and own:
            await self.refuse(kind, send, 401, UNAUTHENTICATED, BAD_AUTHORIZATION)
            return
        # On a surface the gateway answers for the app, the token was meant, and is no one's.
        meant = untaken and _under(relative_path(scope), self.answered_paths)
        if meant:
            answer = None
        elif answer is None:
            answer = ANONYMOUS if self.allow_anonymous else None
        if answer is None:
            scope.pop(PRINCIPAL_KEY, None)
        else:
            scope[PRINCIPAL_KEY] = answer
            if kind == "http" and not self.csrf_passed(scope, answer):
                await send_error(send, 403, CSRF_FAILED, self.csrf_message)
                return
            if kind == "http" and self.logins is not None and answer.sent_by_browser:
                send = self.watch_logout(answer, send)
        await self.app(scope, receive, send)

    def watch_logout(self, principal: Principal, send: Send) -> Send:
        assert self.logins is not None
        reader, ended = self.logins

        async def watched(message: Message) -> None:
            headers = message.get("headers", ())
            if (
                message["type"] == "http.response.start"
                and principal.credential_id
                and login_ended(reader, principal, headers)
            ):
                # Noted before the client hears of the logout: its old cookie is refused.
                await asyncio.to_thread(ended.end, principal.credential_id, principal.user_id)
            await send(message)

        return watched

    def csrf_passed(self, scope: Scope, principal: Principal) -> bool:
        if not principal.sent_by_browser or scope["method"] in SAFE_METHODS:
            return True
        path = relative_path(scope)
        if not _under(path, self.csrf_paths) or _under(path, self.csrf_exempt):
            return True
        sent, expected = header(scope, CSRF_HEADER), principal.csrf_token
        if not sent or not expected:
            return False
        return hmac.compare_digest(sent.encode("latin-1"), expected.encode("utf-8"))

    @staticmethod
    async def refuse(kind: str, send: Send, status: int, code: str, message: str) -> None:
        if kind == "http":
            await send_error(send, status, code, message)
        else:
            await send(refusal(message))


def _bearer(authorization: str | None) -> bool:
    """Whether an ``Authorization`` header is of the Bearer scheme, the gateway's own."""
    if authorization is None:
        return False
    words = authorization.split(None, 1)
    return bool(words) and words[0].lower() == BEARER_SCHEME


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)
