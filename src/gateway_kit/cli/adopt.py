"""``gateway-kit adopt check``: prove on recorded traffic that wrapping an app in a `Gateway`
changes none of its answers (outside the gateway's prefix, until a surface is switched over).

    gateway-kit adopt check MODULE:ATTR --requests FILE [--json] [--timeout S] [--max-body BYTES]

Prints every answer that differs, then one summary line; ``--json`` prints one JSON document
alone. Exits 0 when no answer differs, 1 when one does, 2 when the input is bad (the file,
MODULE:ATTR, an app that fails to start). What the app prints goes to stderr meanwhile, so
that stdout holds the report alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any

from ..adopt import Answer, Findings, Limits, Verdict, check
from ..adopt.compare import how_read
from .table import print_rows

DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_BODY = 1024 * 1024
PROGRESS_EVERY = 100
PROGRESS = "gateway-kit adopt check: {done} of {total} requests replayed"
COLUMNS = ("#", "method", "path", "difference")
SHOWN_PATH = 48
SUMMARY = "{total} requests, {differ} {verb}"
LEFT_OUT = " ({left_out} left out of the HAR file)"
IN_PART = "#{number} {method} {path}: the app: {app}; the gateway: {gateway}"
COMPARED_IN_PART = "answers read in part are compared on what both sides read"


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    adopt = commands.add_parser("adopt", help="check what wrapping an app in a Gateway changes")
    actions = adopt.add_subparsers(dest="action", required=True, metavar="ACTION")
    checking = actions.add_parser(
        "check",
        help="replay recorded requests against the app alone and wrapped, and compare",
        description="Replay recorded requests against the app alone and the app wrapped in a "
        "Gateway, in process, and list every answer that differs (exit status 1 if any does).",
    )
    checking.add_argument(
        "app", metavar="MODULE:ATTR", help="a Flask (WSGI) or ASGI app, or the Gateway you serve"
    )
    checking.add_argument(
        "--requests", required=True, metavar="FILE", help="a HAR file, or JSON lines"
    )
    checking.add_argument("--json", action="store_true", help="print one JSON document alone")
    checking.add_argument(
        "--timeout",
        type=positive(float),
        default=DEFAULT_TIMEOUT,
        help=f"seconds to read one answer, such as a stream (default {DEFAULT_TIMEOUT:g})",
    )
    checking.add_argument(
        "--max-body",
        type=positive(int),
        default=DEFAULT_MAX_BODY,
        metavar="BYTES",
        help=f"bytes of one answer to read at most (default {DEFAULT_MAX_BODY})",
    )
    checking.set_defaults(run=run)


def positive(kind: Callable[[str], float]) -> Callable[[str], Any]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
        return value

    return parse


def progress(done: int, total: int) -> None:
    if total > PROGRESS_EVERY and (done % PROGRESS_EVERY == 0 or done == total):
        print(PROGRESS.format(done=done, total=total), file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    limits = Limits(timeout=args.timeout, max_body=args.max_body)
    with redirect_stdout(sys.stderr):  # what the app prints is no part of the report
        findings = check(args.app, args.requests, limits, progress)
    if args.json:
        print(json.dumps(document(findings), indent=2, ensure_ascii=False))
    else:
        print_report(findings)
    return 1 if findings.differing else 0


def print_report(findings: Findings) -> None:
    rows = [list(COLUMNS)]
    for verdict in findings.differing:
        path = shortened(verdict.request.target)
        for i, difference in enumerate(verdict.differences):
            first = [str(verdict.number), verdict.request.method, path] if i == 0 else [""] * 3
            rows.append([*first, difference.describe()])
    if len(rows) > 1:
        print_rows(rows)
    read_in_part = [v for v in findings.verdicts if v.app.cut or v.gateway.cut]
    for verdict in read_in_part:
        shown = {"app": how_read(verdict.app), "gateway": how_read(verdict.gateway)}
        request = verdict.request
        print(IN_PART.format(number=verdict.number, method=request.method,
                             path=shortened(request.target), **shown))  # fmt: skip
    if read_in_part:
        print(COMPARED_IN_PART)
    print(summary(findings))


def shortened(path: str) -> str:
    return path if len(path) <= SHOWN_PATH else path[: SHOWN_PATH - 1] + "…"


def summary(findings: Findings) -> str:
    differ = len(findings.differing)
    verb = "differs" if differ == 1 else "differ"
    line = SUMMARY.format(total=len(findings.verdicts), differ=differ, verb=verb)
    left_out = ", ".join(f"{n} {why}" for why, n in findings.recording.skipped.items())
    return line + (LEFT_OUT.format(left_out=left_out) if left_out else "")


def document(findings: Findings) -> dict[str, Any]:
    return {
        "requests": len(findings.verdicts),
        "differ": len(findings.differing),
        "kind": findings.recording.kind,
        "left_out": findings.recording.skipped,
        "results": [result(verdict) for verdict in findings.verdicts],
    }


def result(verdict: Verdict) -> dict[str, Any]:
    return {
        "number": verdict.number,
        "method": verdict.request.method,
        "path": verdict.request.target,
        "differs": bool(verdict.differences),
        "app": answer(verdict.app),
        "gateway": answer(verdict.gateway),
        "differences": [
            {"what": d.what, "where": d.where, "app": d.app, "gateway": d.gateway}
            for d in verdict.differences
        ],
    }


def answer(answer: Answer) -> dict[str, Any]:
    return {
        "status": answer.status,
        "bytes_read": len(answer.body),
        "read": how_read(answer),
        "cut": answer.cut,
        "error": answer.error,
    }
