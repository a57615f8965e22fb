"""``gateway-kit serve`` refusing what it cannot do, in one line that says what would help,
before it opens any database; and ``--factory``, which helps."""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_kit.cli import main

from .test_serve_demo import EXE, free_port, running, stop, wait_until_serving

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
