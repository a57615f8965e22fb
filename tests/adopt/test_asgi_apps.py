"""An ASGI app alone and wrapped: both sides run its lifespan, start-up before the first
request and shut-down after the last, and one that fails to start is said."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .conftest import Ran, Site

# An ASGI app that answers whether its lifespan started, and writes down each shut-down.
LIFESPAN_APP = """
import json
from pathlib import Path

started = []


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                started.append(True)
                await send({"type": "lifespan.startup.complete"})
            else:
                with Path("shutdowns").open("a") as shutdowns:
                    shutdowns.write("shut down\\n")
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = json.dumps({"started": bool(started)}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
"""

FAILING_APP = """
async def app(scope, receive, send):
    await receive()
    await send({"type": "lifespan.startup.failed", "message": "no database"})
"""


def test_both_sides_run_the_apps_lifespan(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    module = site.add_module(LIFESPAN_APP)
    recording = tmp_path / "one.jsonl"
    recording.write_text('{"method": "GET", "path": "/"}\n')
    ran = adopt_check(f"{module}:app", "--requests", recording, "--json")
    assert ran.status == 0
    (result,) = json.loads(ran.out)["results"]
    assert (result["app"]["status"], result["gateway"]["status"]) == (200, 200)
    assert json.loads(ran.out)["differ"] == 0
    # Each side's own copy of the module started; both shut down after the last request.
    assert (site.folder / "shutdowns").read_text() == "shut down\n" * 2


def test_an_app_that_fails_to_start_is_said_in_one_line(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    module = site.add_module(FAILING_APP)
    recording = tmp_path / "one.jsonl"
    recording.write_text('{"method": "GET", "path": "/"}\n')
    ran = adopt_check(f"{module}:app", "--requests", recording)
    assert (ran.status, ran.out) == (2, "")
    assert (
        ran.err.splitlines()[-1] == "gateway-kit adopt check: the app failed to start: no database"
    )
