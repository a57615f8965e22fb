"""``gateway-kit serve MODULE:ATTR``: run an app under uvicorn, wrapped in a `Gateway`.

MODULE:ATTR names a `Gateway`, served as it is, or any other WSGI (Flask) or ASGI app, which is
wrapped in a `Gateway` over ``EventLog(--db)``. MODULE is imported with the current directory
first on the path, as uvicorn does.

The database URL reaches the app through the environment: ``GATEWAY_KIT_DB`` is set to ``--db``
before MODULE is imported, so a module that builds its own `Gateway` from that variable (the
contract's default source) serves the same log. With ``--workers N`` above 1, uvicorn starts N
processes that each import the app by name and inherit the environment; a plain app is then
wrapped in each of them by `worker_app`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from ..gateway import Gateway
from ..log import EventLog
from ..settings import DATABASE_URL_VAR
from .sockets import listen

TARGET_VAR = "GATEWAY_KIT_SERVE_APP"
ANONYMOUS_VAR = "GATEWAY_KIT_SERVE_ANONYMOUS"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

BAD_TARGET = "{spec!r} is not MODULE:ATTR, such as myapp.web:app"
NO_MODULE = "cannot import {module!r}: {error}"
NO_ATTRIBUTE = "module {module!r} has no attribute {attr!r}"
DB_NOT_USED = (
    "note: {spec} is a Gateway over its own log ({url}); --db {db} does not change it "
    f"(a module that builds its Gateway from ${DATABASE_URL_VAR} would follow --db)"
)


class TargetError(Exception):
    """MODULE:ATTR cannot be loaded."""


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    serve = commands.add_parser(
        "serve", help="run an app under uvicorn, wrapped in a Gateway over the log"
    )
    serve.add_argument(
        "app", metavar="MODULE:ATTR", help="a Gateway, or a Flask/WSGI or ASGI app to wrap"
    )
    add_db_option(serve)
    serve.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    serve.add_argument(
        "--workers", type=positive_int, default=1, help="processes to serve with (default 1)"
    )
    serve.add_argument(
        "--allow-anonymous",
        action="store_true",
        help="when wrapping a plain app: serve requests without credentials (demos, tests)",
    )
    serve.set_defaults(run=run)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def load_target(spec: str) -> object:
    """The object MODULE:ATTR names (ATTR may be dotted); MODULE is looked for in the current
    directory first, as uvicorn does."""
    module_name, _, attrs = spec.partition(":")
    if not module_name or not attrs:
        raise TargetError(BAD_TARGET.format(spec=spec))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # worker processes inherit the path
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(NO_MODULE.format(module=module_name, error=exc)) from exc
    for attr in attrs.split("."):
        try:
            target = getattr(target, attr)
        except AttributeError:
            raise TargetError(NO_ATTRIBUTE.format(module=module_name, attr=attrs)) from None
    return target


def as_gateway(target: object, db_url: str, *, allow_anonymous: bool) -> Gateway:
    if isinstance(target, Gateway):
        return target
    return Gateway(target, log=EventLog(db_url), allow_anonymous=allow_anonymous)


def worker_app() -> Gateway:
    """The app of one worker process (a uvicorn factory): the target, wrapped if need be."""
    target = load_target(os.environ[TARGET_VAR])
    anonymous = os.environ.get(ANONYMOUS_VAR) == "1"
    return as_gateway(target, os.environ[DATABASE_URL_VAR], allow_anonymous=anonymous)


def run(args: argparse.Namespace) -> int:
    os.environ[DATABASE_URL_VAR] = args.db
    try:
        target = load_target(args.app)
    except TargetError as exc:
        print(f"gateway-kit serve: {exc}", file=sys.stderr)
        return 2
    if isinstance(target, Gateway) and target.log.url != args.db:
        print(DB_NOT_USED.format(spec=args.app, url=target.log.url, db=args.db), file=sys.stderr)
    options: dict[str, Any] = {"host": args.host, "port": args.port}
    if args.workers == 1:
        app = as_gateway(target, args.db, allow_anonymous=args.allow_anonymous)
        uvicorn.run(app, **options)
        return 0
    if isinstance(target, Gateway):
        config = uvicorn.Config(args.app, workers=args.workers, **options)
    else:
        os.environ[TARGET_VAR] = args.app
        os.environ[ANONYMOUS_VAR] = "1" if args.allow_anonymous else "0"
        config = uvicorn.Config(
            f"{__name__}:worker_app", factory=True, workers=args.workers, **options
        )
    # The workers share a socket bound here, as TCP (see `sockets`), not by uvicorn.
    sock = listen(args.host, args.port)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
    return 0
