"""``gateway-kit heartbeat TMUX_SESSION --message TEXT [--every 5m]``: type a heartbeat into
an agent's tmux pane, only when the gateway's decision allows it.

Each round asks the decision (recorded like every other, with its reason), prints it, and on
``allow`` only types the message into the session's active pane (``tmux send-keys``, the text
literally, then Enter). With ``--every`` it goes on at that interval until interrupted (or
``--count`` rounds); a round that fails (the database or tmux away) is printed and the next one
comes as usual.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..app_runs.live import LiveOwnedRuns
from ..exceptions import GatewayKitError, SettingsError
from ..execution.decider import HeartbeatDecider, HeartbeatDecision, check_tmux_session
from ..execution.tmux import Tmux, TmuxError
from ..execution.work import ActiveWork
from ..hooks import PluginContext, Plugins
from ..log import EventLog
from ..runs.store import RunStore
from .durable import refuses_in_memory

DURATION = re.compile(r"(?P<amount>[0-9]+(?:\.[0-9]+)?)(?P<unit>ms|s|m|h)?")
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
BAD_DURATION = "--every must be a duration such as 30s, 5m or 1h, got {value!r}"
BAD_MESSAGE = "--message must be one line of printable text, got {value!r}"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
TMUX_PLUGIN = "tmux_pane"
NOTHING_OBSERVED = (
    "it holds nothing the gateway observed to decide from, and the decisions it records "
    "would vanish with it"
)


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    parser = commands.add_parser(
        "heartbeat", help="type a message into a tmux pane only when the gateway allows it"
    )
    parser.add_argument("tmux_session", metavar="TMUX_SESSION")
    parser.add_argument("--message", required=True, help="the text to type (one line)")
    parser.add_argument("--every", help="ask again at this interval (30s, 5m, 1h)")
    parser.add_argument("--count", type=int, help="with --every: stop after this many rounds")
    parser.add_argument("--tmux-socket", help="the tmux server's socket name (tmux -L)")
    parser.add_argument("--json", action="store_true", help="one decision JSON per line")
    add_db_option(parser)
    refuses_in_memory(parser, NOTHING_OBSERVED)
    parser.set_defaults(run=run)


def duration(value: str) -> float:
    match = DURATION.fullmatch(value.strip())
    seconds = float(match["amount"]) * UNITS[match["unit"]] if match else 0.0
    if seconds <= 0:
        raise SettingsError(BAD_DURATION.format(value=value))
    return seconds


def check_message(value: str) -> str:
    if not value.strip() or CONTROL.search(value):
        raise SettingsError(BAD_MESSAGE.format(value=value[:80]))
    return value


def run(args: argparse.Namespace) -> int:
    # Everything is checked before the first decision is asked or recorded.
    try:
        tmux_session = check_tmux_session(args.tmux_session)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    message = check_message(args.message)
    every = duration(args.every) if args.every is not None else None
    if args.count is not None and args.count < 1:
        raise SettingsError(f"--count must be at least 1, got {args.count}")
    tmux = Tmux(socket_name=args.tmux_socket)
    config = {TMUX_PLUGIN: {"socket_name": args.tmux_socket}} if args.tmux_socket else {}
    with EventLog(args.db) as log:
        plugins = Plugins(config=config, context=PluginContext(log=log))
        # The runs of both kinds keep a bound session busy, as in a gateway.
        runs = [RunStore(log).active_of_streams, LiveOwnedRuns(log).of_streams]
        decider = HeartbeatDecider(log, plugins, work=ActiveWork(log, active_runs=runs))
        rounds = 0
        while True:
            failed = one_round(decider, tmux, tmux_session, message, as_json=args.json)
            rounds += 1
            if every is None:
                return 1 if failed else 0
            if args.count is not None and rounds >= args.count:
                return 0
            time.sleep(every)


def one_round(
    decider: HeartbeatDecider, tmux: Tmux, tmux_session: str, message: str, *, as_json: bool
) -> bool:
    """Decide, print, and type on allow; True when the round failed."""
    try:
        decision = asyncio.run(decider.decide(tmux_session))
    except GatewayKitError as exc:
        print(f"gateway-kit heartbeat: no decision: {exc}", file=sys.stderr)
        return True
    sent, error = False, None
    if decision.allowed:
        try:
            tmux.send_text(tmux_session, message)
            sent = True
        except (TmuxError, ValueError) as exc:
            error = str(exc)
    show(decision, sent, error, as_json=as_json)
    return error is not None


def show(decision: HeartbeatDecision, sent: bool, error: str | None, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({**decision.as_json(), "sent": sent, "error": error}, ensure_ascii=False))
    else:
        at = datetime.fromtimestamp(decision.decided_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = (
            f"{at} {decision.tmux_session_id}: {decision.decision} ({decision.reason}, state "
            f"{decision.state.state.value}): {decision.detail}"
        )
        if sent:
            line += "; message sent"
        print(line, flush=True)
    if error is not None:
        print(f"gateway-kit heartbeat: the message was not sent: {error}", file=sys.stderr)
