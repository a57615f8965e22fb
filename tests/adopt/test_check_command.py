"""``gateway-kit adopt check`` on a legacy Flask app of the tests' own: recorded sessions that
the gateway must not change, and changes it must report."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from .conftest import RECORDINGS, Ran, Site

HAR = RECORDINGS / "chromium.har"
SESSION = RECORDINGS / "session.jsonl"
SMALL_BODY = "4096"  # the stream is read up to here: what both sides read is the same length

# A Gateway the user serves, with one legacy surface switched over: /api/usage, which the app
# answers itself.
TAKES_OVER_USAGE = """
import os

from gateway_kit import EventLog, Gateway, LegacySurfaces
from {site} import app


@app.get("/api/usage")
def usage():
    return {"requests": 3}


gateway = Gateway(
    app, log=EventLog(os.environ["GATEWAY_KIT_DB"]), legacy=LegacySurfaces(usage="/api/usage")
)
"""

# A Gateway the user serves with nothing switched over.
PLAIN_GATEWAY = """
import os

from gateway_kit import EventLog, Gateway
from {site} import app

gateway = Gateway(app, log=EventLog(os.environ["GATEWAY_KIT_DB"]))
"""

# A tiny ASGI middleware around the app that changes two answers: a count in a JSON body,
# and a word of an HTML page.
CHANGES_TWO_ANSWERS = """
import os

from gateway_kit import EventLog, Gateway
from {site} import app

CHANGES = {"/orders/latest": (b'"count":3', b'"count":4'), "/page": (b"Hello", b"Hi there")}


class Rewrite:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        old, new = CHANGES.get(scope.get("path"), (b"", b""))

        async def rewritten(message):
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message["headers"] if k != b"content-length"]
                message["headers"] = kept
            elif old:
                message["body"] = message.get("body", b"").replace(old, new)
            await send(message)

        await self.app(scope, receive, rewritten)


log = EventLog(os.environ["GATEWAY_KIT_DB"])
gateway = Gateway(app, log=log, app_middleware=[(Rewrite, (), {})])
"""


def results(ran: Ran) -> dict[str, dict[str, object]]:
    """The --json document's results, by method and path."""
    document = json.loads(ran.out)
    return {f"{r['method']} {r['path']}": r for r in document["results"]}


def test_a_chromium_har_replays_with_no_difference(
    site: Site, adopt_check: Callable[..., Ran]
) -> None:
    ran = adopt_check(f"{site.module}:app", "--requests", HAR, "--max-body", SMALL_BODY)
    assert ran.status == 0, ran.out
    lines = ran.out.splitlines()
    assert lines[-1] == (
        "5 requests, 0 differ "
        "(1 to other origins, 1 WebSocket connections left out of the HAR file)"
    )
    assert not any("→" in line for line in lines)  # no table of differences


def test_json_lines_replay_with_no_difference_and_each_side_its_own_login(
    site: Site, adopt_check: Callable[..., Ran]
) -> None:
    ran = adopt_check(
        f"{site.module}:app", "--requests", SESSION, "--max-body", SMALL_BODY, "--json"
    )
    assert ran.status == 0
    document = json.loads(ran.out)
    assert (document["requests"], document["differ"], document["kind"]) == (8, 0, "JSON lines")
    by_request = results(ran)
    me = [r for r in document["results"] if r["path"] == "/me"]
    # Each side logged in with its own session, kept in its own module's memory: a login
    # replayed into a shared jar, or a shared module, would not be 200 on both sides.
    assert [(r["app"]["status"], r["gateway"]["status"]) for r in me] == [(200, 200)] * 2
    assert by_request["GET /visits"]["app"]["status"] == 200
    assert not any(r["differs"] or r["differences"] for r in document["results"])


def test_a_gateway_served_by_the_user_is_checked_against_the_app_it_wraps(
    site: Site, adopt_check: Callable[..., Ran]
) -> None:
    gateway = site.add_module(PLAIN_GATEWAY)
    ran = adopt_check(f"{gateway}:gateway", "--requests", SESSION, "--max-body", SMALL_BODY)
    assert ran.status == 0, ran.out
    assert ran.out.splitlines()[-1] == "8 requests, 0 differ"


def test_a_path_the_gateway_takes_over_is_reported(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    gateway = site.add_module(TAKES_OVER_USAGE)
    recording = tmp_path / "usage.jsonl"
    recording.write_text(
        '{"method": "GET", "path": "/orders/latest"}\n{"method": "GET", "path": "/api/usage"}\n'
    )
    ran = adopt_check(f"{gateway}:gateway", "--requests", recording)
    assert ran.status == 1
    header, first, *_ = ran.out.splitlines()
    assert header.split() == ["#", "method", "path", "difference"]
    assert first.split()[:3] == ["2", "GET", "/api/usage"]
    assert "status: 200 → 401" in first
    assert "body at /requests: 3 → (none)" in ran.out
    assert ran.out.splitlines()[-1] == "2 requests, 1 differs"


def test_changed_json_and_html_answers_are_named_in_the_table_and_the_json(
    site: Site, adopt_check: Callable[..., Ran]
) -> None:
    gateway = site.add_module(CHANGES_TWO_ANSWERS)
    args = (f"{gateway}:gateway", "--requests", SESSION, "--max-body", SMALL_BODY)
    ran = adopt_check(*args)
    assert ran.status == 1
    rows = [line.split(None, 3) for line in ran.out.splitlines()[1:3]]
    assert rows[0][:3] == ["3", "GET", "/orders/latest?count=3"]
    assert rows[0][3].strip() == "body at /items/0/count: 3 → 4"
    assert rows[1][:3] == ["5", "GET", "/page"]
    assert rows[1][3].strip().startswith("body line 1: ")
    assert "<p>Hello</p>" in rows[1][3] and "<p>Hi there</p>" in rows[1][3]
    assert ran.out.splitlines()[-1] == "8 requests, 2 differ"

    as_json = results(adopt_check(*args, "--json"))
    assert as_json["GET /orders/latest?count=3"]["differences"] == [
        {"what": "body", "where": "/items/0/count", "app": "3", "gateway": "4"}
    ]
    assert as_json["GET /page"]["differs"] is True
    assert as_json["GET /me"]["differs"] is False


def test_a_stream_that_never_ends_is_read_up_to_max_body_and_compared(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    recording = tmp_path / "events.jsonl"
    recording.write_text('{"method": "GET", "path": "/events"}\n')
    ran = adopt_check(f"{site.module}:app", "--requests", recording, "--max-body", "2048")
    assert ran.status == 0
    assert ran.out.splitlines() == [
        "#1 GET /events: the app: read 2.0 KB of a stream (--max-body reached); "
        "the gateway: read 2.0 KB of a stream (--max-body reached)",
        "answers read in part are compared on what both sides read",
        "1 requests, 0 differ",
    ]


def test_a_stream_that_never_ends_is_read_up_to_the_timeout(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    recording = tmp_path / "events.jsonl"
    recording.write_text('{"method": "GET", "path": "/events"}\n{"method": "GET", "path": "/me"}\n')
    ran = adopt_check(f"{site.module}:app", "--requests", recording, "--timeout", "1", "--json")
    assert ran.status == 0
    events, me = json.loads(ran.out)["results"]
    for side in ("app", "gateway"):
        assert events[side]["cut"] == "timeout"
        assert events[side]["read"].endswith("of a stream (--timeout reached)")
        assert me[side]["status"] == 401  # the requests after it were replayed as well


def test_the_apps_own_bearer_tokens_reach_the_app(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    recording = tmp_path / "bearer.jsonl"
    bearer = {"Authorization": "Bearer app-own-token"}
    recording.write_text(json.dumps({"method": "GET", "path": "/private", "headers": bearer}))
    ran = adopt_check(f"{site.module}:app", "--requests", recording, "--json")
    assert ran.status == 0
    (private,) = json.loads(ran.out)["results"]
    assert (private["app"]["status"], private["gateway"]["status"]) == (200, 200)


def test_what_the_app_prints_stays_out_of_the_json(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    noisy = site.add_module(
        "from {site} import app\n\n@app.get('/noisy')\ndef noisy():\n    print('debug!')\n"
        "    return 'ok'\n"
    )
    recording = tmp_path / "noisy.jsonl"
    recording.write_text('{"method": "GET", "path": "/noisy"}\n')
    ran = adopt_check(f"{noisy}:app", "--requests", recording, "--json")
    assert json.loads(ran.out)["differ"] == 0
    assert ran.err.count("debug!") == 2
    assert sys.modules.get(noisy) is not None


def test_a_long_file_says_its_progress_on_stderr(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    recording = tmp_path / "long.jsonl"
    recording.write_text('{"method": "GET", "path": "/me"}\n' * 201)
    ran = adopt_check(f"{site.module}:app", "--requests", recording)
    assert ran.status == 0
    progress = [line for line in ran.err.splitlines() if line.endswith("requests replayed")]
    assert progress == [
        f"gateway-kit adopt check: {done} of 201 requests replayed" for done in (100, 200, 201)
    ]
    assert ran.out == "201 requests, 0 differ\n"
