"""``scripts/test`` and ``.ci/run``: which steps run, with the tools replaced by stubs that
write down how they were called."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("python", "ruff", "mypy", "lint-imports")
STUB = '#!/bin/sh\necho "$(basename "$0") $*" >> "{calls}"\n'


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtualenv whose tools only write down their arguments."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in TOOLS:
        (bin_dir / tool).write_text(STUB.format(calls=tmp_path / "calls"))
        (bin_dir / tool).chmod(0o755)
    return tmp_path / "venv"


def steps(venv: Path, *command: str, **env: str) -> list[str]:
    """The tools `command` ran, each as its name and first argument."""
    environ = {
        **os.environ,
        "GATEWAY_KIT_VENV": str(venv),
        "GATEWAY_KIT_SKIP_CHROMIUM": "1",
        "GATEWAY_KIT_SKIP_TMUX": "1",
    }
    environ.pop("GATEWAY_KIT_QUICK", None)
    environ.pop("GATEWAY_KIT_TEST_WORKERS", None)
    subprocess.run(command, cwd=ROOT, env={**environ, **env}, check=True, capture_output=True)
    calls = (venv.parent / "calls").read_text().splitlines()
    return [" ".join(call.split()[:2]) for call in calls]


FULL = ["python -m", "ruff check", "ruff format", "mypy", "lint-imports --no-cache", "python -m"]
QUICK = ["python -m", "python -m"]  # the install, then pytest


def test_scripts_test_runs_lint_types_and_tests(venv: Path) -> None:
    assert steps(venv, "scripts/test") == FULL


@pytest.mark.parametrize(
    ("command", "env"),
    [(["scripts/test", "--quick"], {}), (["scripts/test"], {"GATEWAY_KIT_QUICK": "1"})],
    ids=["flag", "variable"],
)
def test_quick_runs_pytest_alone_with_the_arguments_given(
    venv: Path, command: list[str], env: dict[str, str]
) -> None:
    assert steps(venv, *command, "tests/log", "-x", **env) == QUICK
    pytest_call = (venv.parent / "calls").read_text().splitlines()[-1]
    assert pytest_call == "python -m pytest -n 4 tests/log -x"


def test_the_tests_run_in_as_many_workers_as_asked(venv: Path) -> None:
    steps(venv, "scripts/test", "--quick", "tests/log", GATEWAY_KIT_TEST_WORKERS="0")
    pytest_call = (venv.parent / "calls").read_text().splitlines()[-1]
    assert pytest_call == "python -m pytest -n 0 tests/log"


def test_ci_runs_everything_even_with_quick_in_the_environment(venv: Path) -> None:
    assert steps(venv, ".ci/run", GATEWAY_KIT_QUICK="1") == FULL
