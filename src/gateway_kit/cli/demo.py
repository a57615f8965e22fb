"""``gateway-kit demo``: the example app, wrapped by `Gateway`, on embedded SQLite.

Two agents answer in it: the legacy app's fake agent (``POST /api/tasks``, in a Flask thread)
and a simulated goose (``POST /gateway/streams/<id>/runs``) that the gateway reaches in-process
(`gateway_kit.demo.goose`). It prints the URLs to open and serves until Ctrl-C, which also ends
the simulated goose. The socket is bound before anything is printed, so the printed port is the
one served (8000 unless it is taken, then a free one) and a client that connects right away
waits in the backlog instead of being refused.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import socket
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from ..demo.app import DEFAULT_CONVERSATION, DEFAULT_USERS
from ..demo.gateway import build_demo
from .sockets import listen

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DB_FILE = "gateway-demo.db"

ANONYMOUS_NOTE = """
  --anonymous: requests without credentials are served as 'anonymous', who may read and start
  everything. Do not expose this demo to anyone else. What 'anonymous' starts has no owner, so
  publish_guard does not check it and no usage is recorded for it; the legacy Send is the Flask
  app's own route and still needs its login. Log in to see those.
"""
PORT_TAKEN = "port {port} is taken; serving on {chosen} instead"
CANNOT_BIND = "gateway-kit demo: cannot listen on {host}:{port}: {error}"
BANNER = """\
gateway_kit demo: a legacy-style Flask app wrapped by Gateway, with a simulated goose upstream,
its events in {db}
{access}
  Live events of a conversation:  {url}/conversations/{conversation}
  Log in (user {user}, password {password}):  {url}/login

  The same with curl, pasted into a shell in this order (each step keeps what the next needs):
  A shell function that prints one field of a JSON answer:
    field() {{ python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }}
  Log in: the session cookie goes to cookies.txt, and the session's CSRF token to $CSRF (every
  POST to the gateway sends it back in X-CSRF-Token):
    CSRF=$(curl -s -c cookies.txt -H 'Content-Type: application/json' \\
         -d '{{"username": "{user}", "password": "{password}"}}' {url}/login | field csrf_token)
  Start a task, then poll it the legacy way:
    TASK=$(curl -s -b cookies.txt -H 'Content-Type: application/json' \\
         -d '{{"conversation_id": "{conversation}", "message": "hello"}}' \\
         {url}/api/tasks | field task_id)
    curl -b cookies.txt "{url}/api/tasks/$TASK?from=0"
  Start a run on the simulated goose, then follow it until its Finish:
    RUN=$(curl -s -b cookies.txt -H "X-CSRF-Token: $CSRF" -H 'Content-Type: application/json' \\
         -d '{{"message": "hello"}}' {url}/gateway/streams/{conversation}/runs | field run_id)
    curl -N -b cookies.txt "{url}/gateway/runs/$RUN/events"
  Follow the conversation over SSE (Ctrl-C ends it):
    curl -N -b cookies.txt {url}/gateway/streams/{conversation}/events

Ctrl-C stops the demo; start it again and the history is still there.
"""


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    demo = commands.add_parser("demo", help="run the example app on embedded SQLite")
    demo.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    demo.add_argument(
        "--port", type=int, default=None, help=f"default {DEFAULT_PORT}, or a free one if taken"
    )
    # "" rather than None: the demo does not follow $GATEWAY_KIT_DB, it keeps its own file.
    demo.add_argument(
        "--db", default="", help=f"database URL (default: {DB_FILE} here, else in a temp dir)"
    )
    demo.add_argument(
        "--anonymous",
        action="store_true",
        help="serve requests without credentials as 'anonymous' (no login needed)",
    )
    demo.set_defaults(run=run)


def demo_db_url() -> str:
    """A SQLite file in the current directory when it is writable, else in a temp dir."""
    folder = Path.cwd() if os.access(Path.cwd(), os.W_OK) else Path(tempfile.mkdtemp())
    return f"sqlite:///{folder / DB_FILE}"


def listen_on_free_port(host: str, port: int | None) -> socket.socket:
    """Listen on `port`, or when none was asked for, on the default or any free port."""
    if port is not None:
        return listen(host, port)
    try:
        return listen(host, DEFAULT_PORT)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
    sock = listen(host, 0)
    print(PORT_TAKEN.format(port=DEFAULT_PORT, chosen=sock.getsockname()[1]), flush=True)
    return sock


def base_url(host: str, port: int) -> str:
    # A server listening on every address is reached, from here, through the loopback one.
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def run(args: argparse.Namespace) -> int:
    try:
        sock = listen_on_free_port(args.host, args.port)
    except OSError as exc:
        port = DEFAULT_PORT if args.port is None else args.port
        print(CANNOT_BIND.format(host=args.host, port=port, error=exc.strerror), file=sys.stderr)
        return 1
    if not args.verbose:
        # The simulated goose is reached in-process; a log line per request would drown the
        # banner.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    with sock:
        db = args.db or demo_db_url()
        demo = build_demo(db, anonymous=args.anonymous)
        try:
            user, password = next(iter(DEFAULT_USERS.items()))
            print(
                BANNER.format(
                    db=db,
                    access=ANONYMOUS_NOTE if args.anonymous else "",
                    url=base_url(args.host, sock.getsockname()[1]),
                    conversation=DEFAULT_CONVERSATION,
                    user=user,
                    password=password,
                ),
                flush=True,
            )
            # The simulated goose stops with the app's lifespan, after the gateway's pumps.
            config = uvicorn.Config(demo, access_log=False, log_level="warning", lifespan="on")
            # uvicorn shuts down gracefully on Ctrl-C, then raises it again: the demo stopped
            # as asked, which is a success (as for `serve`, where uvicorn.run swallows it).
            with contextlib.suppress(KeyboardInterrupt):
                uvicorn.Server(config).run(sockets=[sock])
        finally:
            demo.log.close()
    return 0
