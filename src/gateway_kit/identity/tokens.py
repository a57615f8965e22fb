"""`ApiTokens`: Bearer tokens for API users and CLIs, and host-login tokens for local clients.

A token is shown once, when it is made: ``gk_<token id>_<secret>`` (``gkh_`` for a host-login
token). The database keeps the id, the user, the scopes and the secret's SHA-256; the id alone
names the token in listings and revocations and proves nothing.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from ..exceptions import InvalidCredential
from ..log import EventLog
from .credentials import KnownToken, credentials_of, next_change
from .secrets import digest, new_secret, same_digest
from .tables import api_tokens

TOKEN_ID_HEX = 12
SCOPE = re.compile(r"[A-Za-z0-9_.:/*-]{1,64}")
USER_ID_MAX = 200
BAD_SCOPE = "a scope is 1 to 64 letters, digits or _.:/*- ; got {scope!r}"
BAD_USER = "a user id is a non-empty string of at most {max} printable characters; got {user!r}"
NO_SUCH_TOKEN = "no token {token_id!r}"


class TokenKind(enum.Enum):
    API = "api"  # a Bearer token, from anywhere
    HOST = "host"  # a host-login token, accepted only from this host

    @property
    def prefix(self) -> str:
        return "gk" if self is TokenKind.API else "gkh"


@dataclass(frozen=True, slots=True)
class ApiToken:
    token_id: str
    user_id: str
    kind: TokenKind
    scopes: frozenset[str]
    created_at: float
    revoked_at: float | None = None


def check_user_id(user_id: object) -> str:
    if (
        not isinstance(user_id, str)
        or not user_id
        or len(user_id) > USER_ID_MAX
        or not user_id.isprintable()
    ):
        raise InvalidCredential(BAD_USER.format(max=USER_ID_MAX, user=user_id))
    return user_id


def check_scopes(scopes: Iterable[object]) -> frozenset[str]:
    checked = set()
    for scope in scopes:
        if not isinstance(scope, str) or not SCOPE.fullmatch(scope):
            raise InvalidCredential(BAD_SCOPE.format(scope=scope))
        checked.add(scope)
    return frozenset(checked)


def parse_token(token: str) -> tuple[TokenKind, str, str] | None:
    """(kind, token id, secret) of a token's text, or None when it is not one of ours."""
    prefix, _, rest = token.partition("_")
    kind = {k.prefix: k for k in TokenKind}.get(prefix)
    token_id, separator, secret = (
        rest[:TOKEN_ID_HEX],
        rest[TOKEN_ID_HEX : TOKEN_ID_HEX + 1],
        rest[TOKEN_ID_HEX + 1 :],
    )
    if kind is None or separator != "_" or not secret or not _is_hex(token_id):
        return None
    return kind, token_id, secret


def _is_hex(text: str) -> bool:
    return len(text) == TOKEN_ID_HEX and all(c in "0123456789abcdef" for c in text)


class ApiTokens:
    """The tokens of the log's database. Reads go through the log's own reader connections, so
    checking a token on every request opens no connection."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._find = sa.select(api_tokens).where(api_tokens.c.token_id == sa.bindparam("token_id"))

    def create(
        self, user_id: str, *, scopes: Iterable[str] = (), kind: TokenKind = TokenKind.API
    ) -> tuple[ApiToken, str]:
        """A new token for `user_id`: its record, and its text, which is shown only now."""
        user_id = check_user_id(user_id)
        checked = check_scopes(scopes)
        token_id = secrets.token_hex(TOKEN_ID_HEX // 2)
        secret = new_secret()
        record = ApiToken(token_id, user_id, kind, checked, time.time())
        with self.log.tables.transaction() as conn:
            conn.execute(
                api_tokens.insert().values(
                    token_id=token_id,
                    user_id=user_id,
                    kind=kind.value,
                    secret_hash=digest(secret),
                    scopes=json.dumps(sorted(checked)),
                    created_at=record.created_at,
                    change=next_change(conn, api_tokens.c.change),
                )
            )
        credentials_of(self.log).noted_token(
            KnownToken(token_id, user_id, kind.value, digest(secret), checked, revoked=False)
        )
        return record, f"{kind.prefix}_{token_id}_{secret}"

    def check(self, token: str, kind: TokenKind) -> ApiToken | None:
        """The live token of `kind` whose text is `token`, or None (unknown, revoked, another
        kind, a wrong secret), read from the database (requests check `checked`, from memory)."""
        parsed = parse_token(token)
        if parsed is None or parsed[0] is not kind:
            return None
        _, token_id, secret = parsed
        rows = self.log.tables.select(self._find, {"token_id": token_id})
        if not rows:
            return None
        row = rows[0]
        if row.kind != kind.value or row.revoked_at is not None:
            return None
        if not same_digest(secret, row.secret_hash):
            return None
        return _record(row)

    def checked(self, token: str, kind: TokenKind) -> KnownToken | None:
        """`check` from this process's `CredentialView`: no database read, unless the token is
        newer than the view's last read (then a read's time at most); `DatabaseUnavailable`
        when the view could not be read for too long."""
        parsed = parse_token(token)
        if parsed is None or parsed[0] is not kind:
            return None
        _, token_id, secret = parsed
        found = credentials_of(self.log).token(token_id)
        if found is None or found.revoked or found.kind != kind.value:
            return None
        return found if same_digest(secret, found.secret_hash) else None

    def live(self, token_ids: Iterable[str]) -> set[str]:
        """Which of `token_ids` name tokens that exist and are not revoked: a query per
        `LIVE_BATCH` of them."""
        wanted = sorted(set(token_ids))
        found: set[str] = set()
        for start in range(0, len(wanted), LIVE_BATCH):
            batch = wanted[start : start + LIVE_BATCH]
            query, size = _live_query(len(batch))
            # The batch padded with its last id: a statement of each size is compiled once.
            params = {f"t{i}": batch[min(i, len(batch) - 1)] for i in range(size)}
            found.update(row.token_id for row in self.log.tables.select(query, params))
        return found

    def list(self, user_id: str | None = None) -> list[ApiToken]:
        if user_id is None:
            rows = self.log.tables.select(TOKENS)
        else:
            rows = self.log.tables.select(TOKENS_OF_USER, {"user_id": user_id})
        return [_record(row) for row in rows]

    def revoke(self, token_id: str) -> ApiToken:
        """Revoke a token (again is harmless); `KeyError` when there is no such token."""
        with self.log.tables.transaction() as conn:
            conn.execute(
                api_tokens.update()
                .where(api_tokens.c.token_id == token_id, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=time.time(), change=next_change(conn, api_tokens.c.change))
            )
            row = conn.execute(
                sa.select(api_tokens).where(api_tokens.c.token_id == token_id)
            ).first()
        if row is None:
            raise KeyError(NO_SUCH_TOKEN.format(token_id=token_id))
        credentials_of(self.log).noted_token(
            KnownToken(
                row.token_id,
                row.user_id,
                row.kind,
                row.secret_hash,
                frozenset(json.loads(row.scopes)),
                revoked=True,
            )
        )
        return _record(row)


LIVE_BATCH = 256
TOKENS = sa.select(api_tokens).order_by(api_tokens.c.created_at)
TOKENS_OF_USER = TOKENS.where(api_tokens.c.user_id == sa.bindparam("user_id"))


@functools.cache
def _live_query(count: int) -> tuple[sa.Select[tuple[str]], int]:
    """The query of `live` for `count` ids, with room for the next power of two of them."""
    size = 1 << max(0, count - 1).bit_length()
    ids: list[sa.BindParameter[str]] = [sa.bindparam(f"t{i}") for i in range(size)]
    query = sa.select(api_tokens.c.token_id).where(
        api_tokens.c.token_id.in_(ids), api_tokens.c.revoked_at.is_(None)
    )
    return query, size


def _record(row: object) -> ApiToken:
    return ApiToken(
        token_id=row.token_id,  # type: ignore[attr-defined]
        user_id=row.user_id,  # type: ignore[attr-defined]
        kind=TokenKind(row.kind),  # type: ignore[attr-defined]
        scopes=frozenset(json.loads(row.scopes)),  # type: ignore[attr-defined]
        created_at=row.created_at,  # type: ignore[attr-defined]
        revoked_at=row.revoked_at,  # type: ignore[attr-defined]
    )
