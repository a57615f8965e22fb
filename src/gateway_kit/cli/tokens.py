"""``gateway-kit tokens``: API tokens (``Authorization: Bearer ...``) and host-login tokens.

    gateway-kit tokens create USER [--scope S ...] [--host]   # prints the token once
    gateway-kit tokens list [USER]
    gateway-kit tokens revoke TOKEN_ID                        # its sockets are disconnected

Only the token's SHA-256 is stored: a token lost is revoked and made again, never shown again.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..access import ApiToken, ApiTokens, TokenKind
from ..exceptions import InvalidCredential
from ..log import EventLog
from .table import print_rows

CREATED = """\
token id: {token_id}   (names the token in `gateway-kit tokens revoke`; proves nothing)
user:     {user_id}
scopes:   {scopes}
kind:     {kind}
token:    {token}

The token is shown this once. Send it as `Authorization: Bearer <token>`.{host_note}"""
HOST_NOTE = "\nA host-login token is accepted only from this machine: a loopback client, no proxy."
COLUMNS = ("token id", "user", "kind", "scopes", "created", "revoked")
REVOKED = "revoked {token_id} ({user_id}); its Socket.IO connections are closed within seconds"


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    tokens = commands.add_parser("tokens", help="create, list and revoke API tokens")
    actions = tokens.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="make a token for USER and print it once")
    create.add_argument("user", metavar="USER")
    create.add_argument(
        "--scope", action="append", default=[], help="a scope the token carries (repeatable)"
    )
    create.add_argument(
        "--host", action="store_true", help="a host-login token, for clients on this machine"
    )
    add_db_option(create)
    create.set_defaults(run=run_create)
    listing = actions.add_parser("list", help="the tokens (never their secrets)")
    listing.add_argument("user", metavar="USER", nargs="?")
    add_db_option(listing)
    listing.set_defaults(run=run_list)
    revoke = actions.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id", metavar="TOKEN_ID")
    add_db_option(revoke)
    revoke.set_defaults(run=run_revoke)


def run_create(args: argparse.Namespace) -> int:
    kind = TokenKind.HOST if args.host else TokenKind.API
    with EventLog(args.db) as log:
        try:
            record, token = ApiTokens(log).create(args.user, scopes=args.scope, kind=kind)
        except InvalidCredential as exc:
            print(f"gateway-kit tokens create: {exc}", file=sys.stderr)
            return 2
    print(
        CREATED.format(
            token_id=record.token_id,
            user_id=record.user_id,
            scopes=", ".join(sorted(record.scopes)) or "(none)",
            kind=record.kind.value,
            token=token,
            host_note=HOST_NOTE if args.host else "",
        )
    )
    return 0


def run_list(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        found = ApiTokens(log).list(args.user)
    print_rows([COLUMNS, *(token_row(token) for token in found)])
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        try:
            record = ApiTokens(log).revoke(args.token_id)
        except KeyError as exc:
            print(f"gateway-kit tokens revoke: {exc.args[0]}", file=sys.stderr)
            return 1
    print(REVOKED.format(token_id=record.token_id, user_id=record.user_id))
    return 0


def token_row(token: ApiToken) -> tuple[str, ...]:
    return (
        token.token_id,
        token.user_id,
        token.kind.value,
        ",".join(sorted(token.scopes)) or "-",
        _when(token.created_at),
        _when(token.revoked_at) if token.revoked_at is not None else "-",
    )


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")
