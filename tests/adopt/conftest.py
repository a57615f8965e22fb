"""Fixtures of the adopt tests: the test site as a user's own module, and the command run."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway_kit.cli import main

HERE = Path(__file__).parent
RECORDINGS = HERE / "recordings"


@dataclass(frozen=True)
class Ran:
    status: int
    out: str
    err: str


@dataclass(frozen=True)
class Site:
    """The test site copied into a fresh folder as `module`, the current directory."""

    module: str
    folder: Path

    def add_module(self, source: str) -> str:
        """A module of the user's own beside the site (``{site}`` names the site's module)."""
        name = f"user_{uuid.uuid4().hex[:8]}"
        (self.folder / f"{name}.py").write_text(source.replace("{site}", self.module))
        return name


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    name = f"site_{uuid.uuid4().hex[:8]}"
    shutil.copy(HERE / "legacy_site.py", tmp_path / f"{name}.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GATEWAY_KIT_DB", f"sqlite:///{tmp_path}/gateway.db")
    before = set(sys.modules)
    yield Site(name, tmp_path)
    for module in set(sys.modules) - before:
        if module.startswith(("site_", "user_")):
            del sys.modules[module]


@pytest.fixture
def adopt_check(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """``gateway-kit adopt check ARGS...``, run in this process."""

    def run(*args: str | Path) -> Ran:
        status = main(["adopt", "check", *map(str, args)])
        captured = capsys.readouterr()
        return Ran(status, captured.out, captured.err)

    return run
