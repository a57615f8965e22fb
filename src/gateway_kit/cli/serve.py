"""``gateway-kit serve MODULE:ATTR``: run an app under uvicorn, wrapped in a `Gateway`.

MODULE:ATTR names a `Gateway`, served as it is, or any other WSGI (Flask) or ASGI app, which is
wrapped in a `Gateway` over ``EventLog(--db)``. MODULE is imported with the current directory
first on the path, as uvicorn does.

The database URL reaches the app through the environment: ``GATEWAY_KIT_DB`` is set to ``--db``
before MODULE is imported, so a module that builds its own `Gateway` from that variable (the
contract's default source) serves the same log. With ``--workers N`` above 1, uvicorn starts N
processes that each import the app by name and inherit the environment; a plain app is then
wrapped in each of them by `worker_app`.

The port is bound before MODULE is imported: a port in use is said at once, before any database
is opened or migrated. A flag that cannot apply (``--allow-anonymous`` or ``--interface`` for a
module that built its `Gateway` itself) is an error rather than silently ignored. A start that
fails leaves no database behind: a SQLite file of ``--db`` that did not exist before is removed
again (`fresh_file`), since importing MODULE may have made it. With ``--workers`` above 1 an
in-memory database is refused: each worker would have one of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from ..gateway import Gateway, is_wsgi
from ..log import EventLog
from ..settings import DATABASE_URL_VAR
from .durable import in_memory
from .fresh_file import FreshSqliteFile
from .sockets import CANNOT_LISTEN, listen

TARGET_VAR = "GATEWAY_KIT_SERVE_APP"
ANONYMOUS_VAR = "GATEWAY_KIT_SERVE_ANONYMOUS"
FACTORY_VAR = "GATEWAY_KIT_SERVE_FACTORY"
INTERFACE_VAR = "GATEWAY_KIT_SERVE_INTERFACE"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
INTERFACES = ("auto", "wsgi", "asgi")

BAD_TARGET = "{spec!r} is not MODULE:ATTR, such as myapp.web:app"
NO_MODULE = "cannot import {module!r}: {error}"
NO_ATTRIBUTE = "module {module!r} has no attribute {attr!r}"
DB_NOT_USED = (
    "note: {spec} is a Gateway over its own log ({url}); --db {db} does not change it "
    f"(a module that builds its Gateway from ${DATABASE_URL_VAR} would follow --db)"
)
NOT_CALLABLE = (
    "{spec} is {kind}, not an app: name a Flask (WSGI) app, an ASGI app or a Gateway, "
    "or with --factory a function that returns one"
)
LOOKS_LIKE_FACTORY = (
    "{spec} takes no arguments, so it is not an app itself: if it builds one, add --factory"
)
UNKNOWN_INTERFACE = (
    "cannot tell whether {spec} is a WSGI or an ASGI app: add --interface wsgi or --interface asgi"
)
FACTORY_FAILED = "{spec} --factory: calling it failed: {error}"
NOT_FOR_A_GATEWAY = (
    "{flag} applies only to an app that serve wraps, and {spec} is a Gateway already: {instead}"
)
NOT_SHARED = (
    "{url} is an in-memory database: each of the {workers} workers would have one of its own, "
    "and none would see what the others write; name a database file (sqlite:///gateway.db) or "
    "PostgreSQL, or serve with --workers 1"
)
NOT_STARTED = "{spec} did not start (the reason is logged above)"
GATEWAY_INSTEAD = {
    "--allow-anonymous": "pass Gateway(..., allow_anonymous=True) in {module} instead",
    "--interface": "pass Gateway(..., wsgi=True or False) in {module} instead",
}


class TargetError(Exception):
    """MODULE:ATTR cannot be loaded, or is not something serve can serve."""


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
        "--factory",
        action="store_true",
        help="MODULE:ATTR is a function that takes no arguments and returns the app or Gateway",
    )
    serve.add_argument(
        "--allow-anonymous",
        action="store_true",
        help="when wrapping a plain app: serve requests without credentials (demos, tests)",
    )
    serve.add_argument(
        "--interface",
        choices=INTERFACES,
        default="auto",
        help="when wrapping a plain app: WSGI or ASGI (default: guessed)",
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


def load_app(spec: str, *, factory: bool, interface: str) -> object:
    """What serve serves for MODULE:ATTR: a Gateway, or an app it can wrap; `TargetError`
    naming the flag that would help otherwise."""
    target = load_target(spec)
    if factory:
        if not callable(target):
            raise TargetError(NOT_CALLABLE.format(spec=spec, kind=kind_of(target)))
        try:
            target = target()
        except Exception as exc:
            raise TargetError(FACTORY_FAILED.format(spec=spec, error=exc)) from exc
    if isinstance(target, Gateway):
        return target
    if not callable(target):
        raise TargetError(NOT_CALLABLE.format(spec=spec, kind=kind_of(target)))
    if not factory and takes_no_arguments(target) and not hasattr(target, "wsgi_app"):
        raise TargetError(LOOKS_LIKE_FACTORY.format(spec=spec))
    if interface == "auto":
        try:
            is_wsgi(target)
        except TypeError:
            raise TargetError(UNKNOWN_INTERFACE.format(spec=spec)) from None
    return target


def kind_of(value: object) -> str:
    name = type(value).__name__
    return "a module" if inspect.ismodule(value) else f"a {name} value"


def takes_no_arguments(target: Callable[..., object]) -> bool:
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters
    )


def as_gateway(target: object, db_url: str, *, allow_anonymous: bool, interface: str) -> Gateway:
    if isinstance(target, Gateway):
        return target
    wsgi = None if interface == "auto" else interface == "wsgi"
    return Gateway(target, log=EventLog(db_url), allow_anonymous=allow_anonymous, wsgi=wsgi)


def worker_app() -> Gateway:
    """The app of one worker process (a uvicorn factory): the target, wrapped if need be."""
    interface = os.environ.get(INTERFACE_VAR, "auto")
    factory = os.environ.get(FACTORY_VAR) == "1"
    target = load_app(os.environ[TARGET_VAR], factory=factory, interface=interface)
    anonymous = os.environ.get(ANONYMOUS_VAR) == "1"
    return as_gateway(
        target, os.environ[DATABASE_URL_VAR], allow_anonymous=anonymous, interface=interface
    )


def refused_flags(args: argparse.Namespace) -> list[str]:
    """The flags given that only apply to an app serve wraps."""
    given = (("--allow-anonymous", args.allow_anonymous), ("--interface", args.interface != "auto"))
    return [flag for flag, on in given if on]


def run(args: argparse.Namespace) -> int:
    if args.workers > 1 and in_memory(args.db):
        error = NOT_SHARED.format(url=args.db, workers=args.workers)
        print(f"gateway-kit serve: {error}", file=sys.stderr)
        return 2
    try:
        sock = listen(args.host, args.port)
    except OSError as exc:
        error = CANNOT_LISTEN.format(host=args.host, port=args.port, error=exc.strerror)
        print(f"gateway-kit serve: {error}", file=sys.stderr)
        return 1
    fresh = FreshSqliteFile(args.db)
    opened: list[EventLog] = []  # the logs serve knows of: closed before a fresh file goes
    with sock:
        code = serve(args, sock, opened)
    if code != 0:
        for log in opened:
            log.close()
        fresh.discard()
    return code


def serve(args: argparse.Namespace, sock: Any, opened: list[EventLog]) -> int:
    """Serve until stopped (0); non-zero when the start failed. The logs opened on the way are
    added to `opened`."""
    os.environ[DATABASE_URL_VAR] = args.db
    try:
        target = load_app(args.app, factory=args.factory, interface=args.interface)
    except TargetError as exc:
        print(f"gateway-kit serve: {exc}", file=sys.stderr)
        return 2
    if isinstance(target, Gateway):
        opened.append(target.log)
        if args.workers > 1 and in_memory(target.log.url):
            error = NOT_SHARED.format(url=target.log.url, workers=args.workers)
            print(f"gateway-kit serve: {error}", file=sys.stderr)
            return 2
        for flag in refused_flags(args):
            module = args.app.partition(":")[0]
            instead = GATEWAY_INSTEAD[flag].format(module=module)
            error = NOT_FOR_A_GATEWAY.format(flag=flag, spec=args.app, instead=instead)
            print(f"gateway-kit serve: {error}", file=sys.stderr)
            return 2
        if target.log.url != args.db:
            print(DB_NOT_USED.format(spec=args.app, url=target.log.url, db=args.db),
                  file=sys.stderr)  # fmt: skip
    options: dict[str, Any] = {"host": args.host, "port": args.port}
    if args.workers == 1:
        app = as_gateway(
            target, args.db, allow_anonymous=args.allow_anonymous, interface=args.interface
        )
        if app.log not in opened:
            opened.append(app.log)
        server = uvicorn.Server(uvicorn.Config(app, **options))
        # uvicorn stops gracefully on Ctrl-C, then raises it again: a stop as asked. It exits
        # (SystemExit) when the app's start-up fails, having logged why.
        with contextlib.suppress(KeyboardInterrupt, SystemExit):
            server.run(sockets=[sock])
        if not server.started:
            print(f"gateway-kit serve: {NOT_STARTED.format(spec=args.app)}", file=sys.stderr)
            return 1
        return 0
    if isinstance(target, Gateway):
        config = uvicorn.Config(args.app, factory=args.factory, workers=args.workers, **options)
    else:
        os.environ[TARGET_VAR] = args.app
        os.environ[ANONYMOUS_VAR] = "1" if args.allow_anonymous else "0"
        os.environ[FACTORY_VAR] = "1" if args.factory else "0"
        os.environ[INTERFACE_VAR] = args.interface
        config = uvicorn.Config(
            f"{__name__}:worker_app", factory=True, workers=args.workers, **options
        )
    # The workers share the socket bound here, as TCP (see `sockets`), not by uvicorn.
    Multiprocess(config, sockets=[sock]).run()
    return 0
