"""The plugin docs' code works as shown. docs/writing_plugins.md's tutorial, its files written to
a folder as a reader would save them: its tests pass under pytest as its console says, ruff
passes it under its own settings, its entry point names its plugin and `gateway-kit plugins`
lists that plugin's hooks. docs/testing_plugins.md's "Testing a plugin through a Gateway": its
two test modules pass under pytest, and the goose endpoints its wire contract lists are those a
run with a follow-up asks of the fake goose."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from gateway_kit import EventLog, Gateway, GooseUpstream, GuardVeto, hookimpl
from gateway_kit.hooks import ENTRY_POINT_GROUP, PASSED_IN, Plugins
from gateway_kit.testing import FakeGoose, Turn, asgi_client
from tests.support.docs import PYTHON_BLOCK, section
from tests.test_docs import CONSOLE_BLOCK, TESTING_PLUGINS_DOC, WRITING_PLUGINS_DOC

HEADING = "## Testing a plugin through a Gateway"
CONTRACT = "### With respx: the goose wire contract"
TUTORIAL = "## Tutorial: a finish guard"
TABLE_REQUEST = re.compile(r"^\| `(?P<method>[A-Z]+) (?P<path>/[^`]+)` \|", re.MULTILINE)
TITLED_BLOCK = re.compile(r'^```\w+ title="(?P<path>[^"]+)"\n(?P<body>.*?)^```', re.S | re.M)
PASSED = re.compile(r"(\d+) passed")
RUN_TIMEOUT = 120


def run_pytest(folder: Path) -> str:
    """pytest's output for `folder`, run in a process of its own as a reader runs it: no
    conftest, plugin or event loop of ours. Fails unless every test passed, without warnings."""
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert PASSED.search(finished.stdout) is not None
    assert "warning" not in finished.stdout.lower(), finished.stdout
    return finished.stdout


def passed(output: str) -> int:
    return int(PASSED.findall(output)[-1])


# --- the tutorial ---------------------------------------------------------------------------


def tutorial() -> str:
    """The tutorial, the document's last section (its code holds lines that begin with `# `)."""
    text = WRITING_PLUGINS_DOC.read_text(encoding="utf-8")
    return text[text.index(f"\n{TUTORIAL}\n") :]


def tutorial_files(folder: Path) -> dict[str, str]:
    """Write the tutorial's files (its blocks titled with a path) under `folder`."""
    files = {m["path"]: m["body"] for m in TITLED_BLOCK.finditer(tutorial())}
    for path, body in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(body, encoding="utf-8")
    return files


def console_lines(command: str) -> list[str]:
    """What the tutorial's console blocks show after `$ command`, up to the next command."""
    for block in CONSOLE_BLOCK.findall(tutorial()):
        commands = re.split(r"^\$ ", block, flags=re.M)
        for text in commands:
            if text.startswith(f"{command}\n"):
                return text.splitlines()[1:]
    raise AssertionError(f"the tutorial shows no `$ {command}`")


def test_the_tutorial_shows_its_three_files(tmp_path: Path) -> None:
    files = tutorial_files(tmp_path)
    assert sorted(files) == [
        "gateway_kit_written_files.py",
        "pyproject.toml",
        "tests/test_written_files.py",
    ]
    assert "def finish_guard(" in files["gateway_kit_written_files.py"]


def test_the_tutorials_tests_pass_as_its_console_says(tmp_path: Path) -> None:
    tutorial_files(tmp_path)
    (said,) = [line for line in console_lines("python -m pytest -q") if PASSED.fullmatch(line)]
    assert passed(run_pytest(tmp_path)) == passed(said)


def test_the_tutorials_files_pass_ruff_under_its_own_settings(tmp_path: Path) -> None:
    tutorial_files(tmp_path)
    for command in (["check"], ["format", "--check"]):
        finished = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--no-cache", "."],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert finished.returncode == 0, finished.stdout + finished.stderr


def test_the_tutorials_entry_point_names_its_plugin_as_listed(tmp_path: Path) -> None:
    files = tutorial_files(tmp_path)
    project = tomllib.loads(files["pyproject.toml"])["project"]
    ((name, target),) = project["entry-points"][ENTRY_POINT_GROUP].items()
    module_name, attribute = target.split(":")
    spec = importlib.util.spec_from_file_location(module_name, tmp_path / f"{module_name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plugin = getattr(module, attribute)()  # each Gateway makes one from the class
    infos = Plugins([plugin], load_entry_points=False).describe()
    (hooks,) = [info.hooks for info in infos if info.source.kind == PASSED_IN]
    rows = [re.split(r"\s{2,}", line) for line in console_lines("gateway-kit plugins")]
    (row,) = [row for row in rows if row[0] == name]
    assert row == [name, f"entry point ({project['name']} {project['version']})", ", ".join(hooks)]


# --- testing a plugin through a Gateway -----------------------------------------------------


def recipe_modules() -> list[str]:
    return PYTHON_BLOCK.findall(section(TESTING_PLUGINS_DOC, HEADING))


def test_the_recipes_pass_under_pytest_as_shown(tmp_path: Path) -> None:
    modules = recipe_modules()
    assert len(modules) == 2
    for number, module in enumerate(modules, 1):
        (tmp_path / f"test_recipe_{number}.py").write_text(module, encoding="utf-8")
    tests = sum(len(re.findall(r"^def test_", module, re.MULTILINE)) for module in modules)
    assert passed(run_pytest(tmp_path)) == tests


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
        (m["method"], m["path"])
        for m in TABLE_REQUEST.finditer(section(TESTING_PLUGINS_DOC, CONTRACT))
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
