"""Reading the legacy Flask app's session cookie, as Flask itself reads it.

Flask keeps the session in the cookie, signed with ``SECRET_KEY`` (or one of
``SECRET_KEY_FALLBACKS``, so that rotating the key logs nobody out) by itsdangerous's
`URLSafeTimedSerializer`: salt ``cookie-session``, HMAC key derivation over SHA-1, Flask's
tagged JSON, and a signature older than ``PERMANENT_SESSION_LIFETIME`` is refused. The gateway
only reads the cookie: it never writes or re-issues one.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

FLASK_SALT = "cookie-session"
DEFAULT_COOKIE_NAME = "session"
DEFAULT_MAX_AGE = 31 * 24 * 3600.0  # Flask's PERMANENT_SESSION_LIFETIME
VERIFIED_CACHE = 4096
NO_SECRET = "the Flask session cookie needs the app's SECRET_KEY; none was configured"


def _session_serializer() -> Any:
    # Flask's own tagged JSON (tuples, bytes, datetimes... round-trip as Flask wrote them).
    from flask.json.tag import TaggedJSONSerializer

    return TaggedJSONSerializer()


@dataclass(frozen=True)
class FlaskSessionSettings:
    """:param secret_key: the app's ``SECRET_KEY``.
    :param fallbacks: its ``SECRET_KEY_FALLBACKS``, older keys still accepted.
    :param cookie_name: its ``SESSION_COOKIE_NAME``.
    :param max_age: seconds a cookie's signature stays valid (``PERMANENT_SESSION_LIFETIME``).
    :param user_key: the session key holding the logged-in user's id.
    :param login_key: the session key holding a per-login random id (a login nonce), which
        names the credential; without it every cookie login of a user is one credential.
    :param csrf_key: the session key holding the CSRF token the app hands its pages.
    """

    secret_key: str | bytes
    fallbacks: Sequence[str | bytes] = ()
    cookie_name: str = DEFAULT_COOKIE_NAME
    max_age: float = DEFAULT_MAX_AGE
    user_key: str = "username"
    login_key: str = "login_id"
    csrf_key: str = "csrf_token"

    def __post_init__(self) -> None:
        if not self.secret_key:
            raise ValueError(NO_SECRET)

    @classmethod
    def from_app(cls, app: Any, **overrides: Any) -> FlaskSessionSettings:
        """The settings a Flask app signs its session cookie with."""
        config = app.config
        lifetime = config.get("PERMANENT_SESSION_LIFETIME", DEFAULT_MAX_AGE)
        if isinstance(lifetime, timedelta):
            lifetime = lifetime.total_seconds()
        values: dict[str, Any] = {
            "secret_key": config.get("SECRET_KEY"),
            "fallbacks": tuple(config.get("SECRET_KEY_FALLBACKS") or ()),
            "cookie_name": config.get("SESSION_COOKIE_NAME") or DEFAULT_COOKIE_NAME,
            "max_age": float(lifetime),
        }
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class FlaskLogin:
    """A session cookie that holds a logged-in user.

    :param per_login: the session names its login (a login nonce): the credential is this
        login's alone. Otherwise it is every login of the user, and only the cookies signed
        before it last ended are refused (a later login works again).
    :param signed_at: when the cookie was signed (epoch seconds, whole).
    """

    user_id: str
    credential_id: str
    csrf_token: str | None
    per_login: bool = True
    signed_at: float = 0.0


@dataclass
class FlaskSessionReader:
    settings: FlaskSessionSettings
    _serializer: URLSafeTimedSerializer = field(init=False, repr=False)
    # Cookie value → (its login, until when its signature is young enough).
    _verified: dict[str, tuple[FlaskLogin | None, float]] = field(
        init=False, repr=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        settings = self.settings
        self._serializer = URLSafeTimedSerializer(
            # itsdangerous signs with the last key and accepts any of them.
            [*settings.fallbacks, settings.secret_key],  # type: ignore[arg-type]
            salt=FLASK_SALT,
            serializer=_session_serializer(),
            signer_kwargs={"key_derivation": "hmac", "digest_method": hashlib.sha1},
        )

    def session(self, value: str) -> Mapping[str, Any] | None:
        """The session a cookie value holds, or None when it is tampered with, signed with
        an unknown key, or too old."""
        verified = self._verify(value)
        return None if verified is None else verified[0]

    def _verify(self, value: str) -> tuple[Mapping[str, Any], float] | None:
        """The session a cookie value holds and when it was signed, or None."""
        try:
            data, signed_at = self._serializer.loads(
                value, max_age=int(self.settings.max_age), return_timestamp=True
            )
        except (BadSignature, ValueError, TypeError):
            return None
        return (data, signed_at.timestamp()) if isinstance(data, Mapping) else None

    def login(self, cookie_header: str | None) -> FlaskLogin | None:
        """The login the request's ``Cookie`` header carries, if any.

        A browser sends the same cookie with every request of a session, so the answer for a
        cookie value is kept (up to `VERIFIED_CACHE` values) until its signature would be too
        old: the same text verifies the same way every time.
        """
        value = cookie_value(cookie_header, self.settings.cookie_name)
        if value is None:
            return None
        now = time.time()
        known = self._verified.get(value)
        if known is not None and now < known[1]:
            return known[0]
        verified = self._verify(value)
        if verified is None:
            return None
        data, signed_at = verified
        login = self.login_of(data, signed_at)
        if len(self._verified) >= VERIFIED_CACHE:
            self._verified.pop(next(iter(self._verified)))  # the oldest
        self._verified[value] = (login, signed_at + self.settings.max_age)
        return login

    def login_of(self, session: Mapping[str, Any], signed_at: float = 0.0) -> FlaskLogin | None:
        settings = self.settings
        user = session.get(settings.user_key)
        if not isinstance(user, str) or not user:
            return None
        nonce = session.get(settings.login_key)
        per_login = isinstance(nonce, str) and bool(nonce)
        if per_login:
            credential = "login:" + hashlib.sha256(f"{user}\0{nonce}".encode()).hexdigest()[:32]
        else:
            credential = "login:" + hashlib.sha256(user.encode()).hexdigest()[:32]
        csrf = session.get(settings.csrf_key)
        return FlaskLogin(
            user, credential, csrf if isinstance(csrf, str) and csrf else None, per_login, signed_at
        )


def cookie_value(header: str | None, name: str) -> str | None:
    """The value of cookie `name` in a ``Cookie`` header, or None.

    Pair by pair, as browsers send them: another site's malformed cookie in the same header
    does not hide ours (`http.cookies` gives up on the whole header at the first bad pair).
    """
    if not header or name not in header:
        return None
    for pair in header.split(";"):
        key, _, value = pair.strip().partition("=")
        if key == name:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            return value or None
    return None
