"""``gateway-kit tokens``: API tokens (``Authorization: Bearer ...``) and host-login tokens.

    gateway-kit tokens create USER [--scope S ...] [--host] [--json | --quiet]  # the token, once
    gateway-kit tokens list [USER] [--json]
    gateway-kit tokens revoke TOKEN_ID [--json]               # its sockets are disconnected

Only the token's SHA-256 is stored: a token lost is revoked and made again, never shown again.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..exceptions import InvalidCredential
from ..identity.tokens import ApiToken, ApiTokens, TokenKind
from ..log import EventLog
from .durable import refuses_in_memory
from .json_output import add_json_option, print_json
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
ALREADY_REVOKED = "{token_id} ({user_id}) was already revoked at {when} UTC; nothing changed"
SHOWN_ONCE = "The token is shown this once. Send it as `Authorization: Bearer <token>`."
CREATE_VANISHES = "the token would vanish with it, and no server could accept it"
NO_TOKENS = "it holds no token"


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
    shown = create.add_mutually_exclusive_group()
    shown.add_argument(
        "--json", action="store_true", help="the token and its record as one JSON object"
    )
    shown.add_argument("--quiet", action="store_true", help="print the token alone")
    add_db_option(create)
    refuses_in_memory(create, CREATE_VANISHES)
    create.set_defaults(run=run_create)
    listing = actions.add_parser("list", help="the tokens (never their secrets)")
    listing.add_argument("user", metavar="USER", nargs="?")
    listing.add_argument("--json", action="store_true", help="one JSON object per token")
    add_db_option(listing)
    refuses_in_memory(listing, NO_TOKENS)
    listing.set_defaults(run=run_list)
    revoke = actions.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id", metavar="TOKEN_ID")
    add_json_option(revoke)
    add_db_option(revoke)
    refuses_in_memory(revoke, NO_TOKENS)
    revoke.set_defaults(run=run_revoke)


def run_create(args: argparse.Namespace) -> int:
    kind = TokenKind.HOST if args.host else TokenKind.API
    with EventLog(args.db) as log:
        try:
            record, token = ApiTokens(log).create(args.user, scopes=args.scope, kind=kind)
        except InvalidCredential as exc:
            print(f"gateway-kit tokens create: {exc}", file=sys.stderr)
            return 2
    if args.quiet:
        print(token)
        return 0
    if args.json:
        print(json.dumps({**token_json(record), "token": token}, ensure_ascii=False))
        print(SHOWN_ONCE + (HOST_NOTE if args.host else ""), file=sys.stderr)
        return 0
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
    if args.json:
        for token in found:
            print(json.dumps(token_json(token), ensure_ascii=False))
        return 0
    print_rows([COLUMNS, *(token_row(token) for token in found)])
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        tokens = ApiTokens(log)
        before = next((t for t in tokens.list() if t.token_id == args.token_id), None)
        try:
            record = tokens.revoke(args.token_id)
        except KeyError as exc:
            print(f"gateway-kit tokens revoke: {exc.args[0]}", file=sys.stderr)
            return 1
    revoked_before = None if before is None else before.revoked_at
    if args.json:
        print_json({**token_json(record), "already_revoked": revoked_before is not None})
        return 0
    if revoked_before is not None:
        when = _when(revoked_before)
        print(ALREADY_REVOKED.format(token_id=record.token_id, user_id=record.user_id, when=when))
        return 0
    print(REVOKED.format(token_id=record.token_id, user_id=record.user_id))
    return 0


def token_json(token: ApiToken) -> dict[str, object]:
    return {
        "token_id": token.token_id,
        "user_id": token.user_id,
        "kind": token.kind.value,
        "scopes": sorted(token.scopes),
        "created_at": token.created_at,
        "revoked_at": token.revoked_at,
    }


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
