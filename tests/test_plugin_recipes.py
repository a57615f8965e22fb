"""docs/plugins.md's "Testing a plugin through a Gateway" works as shown: its two test modules,
written to a folder as a reader would save them, pass under pytest; and the goose endpoints its
wire contract lists are those a run with a follow-up asks of the fake goose."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from gateway_kit import EventLog, Gateway, GooseUpstream, GuardVeto, hookimpl
from gateway_kit.testing import FakeGoose, Turn, asgi_client
from tests.support.docs import PYTHON_BLOCK, section
from tests.test_docs import PLUGINS_DOC

HEADING = "## Testing a plugin through a Gateway"
CONTRACT = "### With respx: the goose wire contract"
TABLE_REQUEST = re.compile(r"^\| `(?P<method>[A-Z]+) (?P<path>/[^`]+)` \|", re.MULTILINE)
PASSED = re.compile(r"(\d+) passed")
RUN_TIMEOUT = 120


def recipe_modules() -> list[str]:
    return PYTHON_BLOCK.findall(section(PLUGINS_DOC, HEADING))


def test_the_recipes_pass_under_pytest_as_shown(tmp_path: Path) -> None:
    modules = recipe_modules()
    assert len(modules) == 2
    for number, module in enumerate(modules, 1):
        (tmp_path / f"test_recipe_{number}.py").write_text(module, encoding="utf-8")
    tests = sum(len(re.findall(r"^def test_", module, re.MULTILINE)) for module in modules)
    # A process of its own, as a reader runs it: no conftest, plugin or event loop of ours.
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert PASSED.search(finished.stdout) is not None
    assert int(PASSED.findall(finished.stdout)[-1]) == tests
    assert "warning" not in finished.stdout.lower(), finished.stdout


class VetoOnce:
    def __init__(self) -> None:
        self.vetoed = False

    @hookimpl
    def finish_guard(self) -> GuardVeto | None:
        if self.vetoed:
            return None
        self.vetoed = True
        return GuardVeto("once more", missing=["x"])


def test_the_wire_contract_lists_the_endpoints_a_run_asks_of_goose(sqlite_url: str) -> None:
    documented = {
        (m["method"], m["path"]) for m in TABLE_REQUEST.finditer(section(PLUGINS_DOC, CONTRACT))
    }
    fake = FakeGoose(ping_interval=0.05)
    fake.script_next_session(Turn().text("done"), Turn().text("done, really"))

    async def main() -> str:
        async with fake.client() as goose:
            with EventLog(sqlite_url) as log:
                gateway = Gateway(
                    log=log,
                    upstream=GooseUpstream(secret_key=fake.secret_key, client=goose),
                    plugins=[VetoOnce()],
                    allow_anonymous=True,
                    load_entry_points=False,
                )
                async with asgi_client(gateway) as client:
                    started = await client.post("/gateway/streams/s/runs", json={"message": "m"})
                    run_id: str = started.json()["run_id"]
                    async with asyncio.timeout(20):
                        while (await client.get(f"/gateway/runs/{run_id}")).json()[
                            "status"
                        ] == "active":
                            await asyncio.sleep(0.05)
        (session_id,) = fake.sessions
        return session_id

    session_id = asyncio.run(main())
    asked = {(r.method, r.path.replace(session_id, "{id}")) for r in fake.requests}
    assert asked == documented
    assert len(fake.reply_calls) == 2 and len(fake.cancel_calls) == 1
