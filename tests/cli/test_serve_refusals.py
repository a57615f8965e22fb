"""``gateway-kit serve`` refusing what it cannot do, in one line that says what would help,
leaving no database behind; and ``--factory``, which helps."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main

from .commands import EXE, free_port, running, stop, wait_until_serving

MODULE = """
import os

from flask import Flask

from gateway_kit import EventLog, Gateway


def create_app():
    app = Flask(__name__)
    app.get("/hello")(lambda: {"hello": "from a factory"})
    return app


def four_arguments(a, b, c, d):
    return None


settings = {"debug": True}
gateway = Gateway(create_app(), log=EventLog(os.environ["GATEWAY_KIT_DB"]), load_entry_points=False)


async def fails_to_start(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "the app cannot start"})
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The name of a fresh module in the current directory, as a user's own app module is."""
    name = f"site_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GATEWAY_KIT_DB", f"sqlite:///{tmp_path}/gateway.db")
    yield name
    sys.modules.pop(name, None)


def test_a_port_in_use_is_said_before_the_app_is_imported(
    site: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", f"{site}:gateway", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err == f"gateway-kit serve: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert site not in sys.modules  # nothing imported, so no database opened or migrated
    assert not (tmp_path / "gateway.db").exists()


@pytest.mark.parametrize(
    ("attr", "said"),
    [
        ("settings", "is a dict value, not an app: name a Flask (WSGI) app, an ASGI app or a "
                     "Gateway, or with --factory a function that returns one"),
        ("create_app", "takes no arguments, so it is not an app itself: if it builds one, add "
                       "--factory"),
        ("four_arguments", "is a WSGI or an ASGI app: add --interface wsgi or --interface asgi"),
        ("os", "is a module, not an app"),
    ],
)  # fmt: skip
def test_what_is_not_an_app_names_the_flag_that_would_help(
    site: str, attr: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", f"{site}:{attr}", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gateway-kit serve: ")
    assert f"{site}:{attr} " in err and said in err


@pytest.mark.parametrize(
    ("flags", "instead"),
    [
        (["--allow-anonymous"], "pass Gateway(..., allow_anonymous=True) in {site} instead"),
        (["--interface", "wsgi"], "pass Gateway(..., wsgi=True or False) in {site} instead"),
    ],
)
def test_a_flag_that_cannot_apply_to_a_built_gateway_is_an_error(
    site: str, flags: list[str], instead: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", f"{site}:gateway", "--port", str(free_port()), *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{flags[0]} applies only to an app that serve wraps" in err
    assert instead.format(site=site) in err


def test_factory_serves_the_app_the_function_returns(site: str, tmp_path: Path) -> None:
    port = free_port()
    command = [*EXE, "serve", f"{site}:create_app", "--factory", "--allow-anonymous"]
    with running([*command, "--port", str(port)], tmp_path) as server:
        wait_until_serving(server, f"http://127.0.0.1:{port}/hello")
        answer = httpx.get(f"http://127.0.0.1:{port}/hello")
        assert answer.json() == {"hello": "from a factory"}
        _, err = stop(server)
    assert "Traceback" not in err


def database_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("gateway.db"))


@pytest.mark.parametrize(
    "args",
    [
        ["{site}:gateway", "--allow-anonymous"],  # a flag a built Gateway cannot take
        ["{site}:gateway", "--interface", "asgi"],
        ["{site}:no_such_attribute"],
        ["{site}:settings"],  # not an app
    ],
    ids=["a-flag-for-plain-apps", "interface", "no-such-attribute", "not-an-app"],
)
def test_a_start_refused_after_the_app_was_imported_leaves_no_database(
    site: str, tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["serve", *(arg.format(site=site) for arg in args), "--port", str(free_port())]
    assert main(command) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert database_files(tmp_path) == []


def test_an_app_whose_start_up_fails_leaves_no_database(
    site: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["serve", f"{site}:fails_to_start", "--interface", "asgi"]
    assert main([*command, "--port", str(free_port())]) == 1
    assert f"{site}:fails_to_start did not start" in capsys.readouterr().err
    assert database_files(tmp_path) == []


def test_a_failed_start_keeps_a_database_that_was_there_before(
    site: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(f"sqlite:///{tmp_path}/gateway.db") as log:
        log.append("conv", "Message", {"text": "kept"})
    assert main(["serve", f"{site}:gateway", "--allow-anonymous", "--port", str(free_port())]) == 2
    capsys.readouterr()
    with EventLog(f"sqlite:///{tmp_path}/gateway.db") as log:
        assert [e.data for e in log.read()] == [{"text": "kept"}]


def test_serve_with_workers_refuses_an_in_memory_database_before_importing_the_app(
    tmp_path: Path,
) -> None:
    (tmp_path / "never_imported.py").write_text("raise SystemExit('imported')\n")
    port = str(free_port())
    done = subprocess.run(
        [
            *EXE,
            "serve",
            "never_imported:app",
            "--workers",
            "2",
            "--port",
            port,
            "--db",
            "sqlite:///",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "gateway-kit serve: sqlite:/// is an in-memory database: each of the 2 workers would "
        "have one of its own, and none would see what the others write; name a database file "
        "(sqlite:///gateway.db) or PostgreSQL, or serve with --workers 1\n"
    )
