"""Migrations: our own version table, host tables untouched, safe concurrent start, wheel-ready."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from gateway_kit import EventLog
from gateway_kit.log import migrate
from gateway_kit.log.schema import HEAD_REVISION, VERSION_TABLE

ROOT = Path(__file__).resolve().parents[2]
OPEN_SCRIPT = """
import sys
from gateway_kit import EventLog
with EventLog(sys.argv[1]) as log:
    log.append("race", "Started", {"who": sys.argv[2]})
    print(log.epoch)
"""


def test_head_revision_constant_matches_the_scripts() -> None:
    config = Config()
    config.set_main_option("script_location", str(migrate.migrations_path()))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION


def test_upgrade_keeps_to_its_own_tables(log_url: str) -> None:
    engine = sa.create_engine(log_url, poolclass=sa.NullPool)
    with engine.begin() as conn:  # the host app's own Alembic state and tables
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.exec_driver_sql("INSERT INTO alembic_version VALUES ('host_rev_42')")
        conn.exec_driver_sql("CREATE TABLE users (name TEXT)")
        conn.exec_driver_sql("INSERT INTO users VALUES ('ada')")

    assert migrate.upgrade(log_url) is None
    assert migrate.upgrade(log_url) == HEAD_REVISION  # second run: nothing to do

    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").all() == [
            ("host_rev_42",)
        ]
        assert conn.exec_driver_sql("SELECT name FROM users").all() == [("ada",)]
        assert conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").all() == [
            (HEAD_REVISION,)
        ]
        tables = set(sa.inspect(conn).get_table_names())
    engine.dispose()
    assert {t for t in tables if not t.startswith("gateway_kit_")} == {"alembic_version", "users"}


def test_processes_starting_together_on_a_fresh_database_do_not_race(log_url: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_SCRIPT, log_url, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    results = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    epochs = {out.strip() for out, _ in results}
    assert len(epochs) == 1  # one log, created once
    with EventLog(log_url) as log:
        assert sorted(e.data["who"] for e in log.read(settled=False)) == ["0", "1", "2", "3"]
        assert epochs == {log.epoch}


def test_wheel_carries_the_migrations_and_the_built_in_plugins(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = wheels.glob("gateway_kit-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True
    )
    url = f"sqlite:///{tmp_path}/fresh.db"
    done = subprocess.run(
        [str(env_dir / "bin" / "gateway-kit"), "db", "upgrade", "--db", url],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the checkout: the scripts must come from the wheel
    )
    assert f"upgraded from an empty database to {HEAD_REVISION}" in done.stdout
    located = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c",
         "from gateway_kit.log.migrate import migrations_path; print(migrations_path())"],
        check=True, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert str(env_dir) in located.stdout
    listed = subprocess.run(
        [str(env_dir / "bin" / "gateway-kit"), "plugins", "--json"],
        check=True, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert '"name": "default_authorization", "from": "built-in"' in listed.stdout
    with EventLog(url) as log:
        assert log.append("s", "T").seq == 1


@pytest.mark.parametrize("steps", [1, 2])
def test_recent_revisions_go_down_and_up_again_with_the_events_kept(
    log_url: str, steps: int
) -> None:
    with EventLog(log_url) as log:
        log.append("s", "Message", run_id="r")
        log.append("s", "Finish", run_id="r")
    engine = sa.create_engine(log_url, poolclass=sa.NullPool)
    config = Config()
    config.set_main_option("script_location", str(migrate.migrations_path()))
    scripts = ScriptDirectory.from_config(config)
    target = HEAD_REVISION
    for _ in range(steps):
        target = str(scripts.get_revision(target).down_revision)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, target)
        with engine.connect() as conn:
            version = conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar()
            tables = sa.inspect(conn).get_table_names()
        assert version == target
        assert ("gateway_kit_stream_heads" in tables) == (target >= "0005")
        assert inserts_under_the_ordering_lock(engine) in (None, target < "0006")
        # Opening the log upgrades it again; its events and positions carry on.
        with EventLog(log_url) as log:
            assert log.prune(older_than=0) == 2
            assert log.append("s", "Message").pos == 3
        assert inserts_under_the_ordering_lock(engine) in (None, False)
    finally:
        engine.dispose()


def inserts_under_the_ordering_lock(engine: sa.Engine) -> bool | None:
    """Whether PostgreSQL's one-event append inserts before releasing the ordering lock (as
    before revision 0006); None on SQLite, which has no such function."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        body = conn.exec_driver_sql(
            "SELECT pg_get_functiondef('gateway_kit_append_one'::regproc)"
        ).scalar()
    assert isinstance(body, str)
    return body.index("INSERT INTO") < body.index("pg_advisory_unlock")
