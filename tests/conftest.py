"""Fixtures shared by the whole suite: one behavioural suite runs against every log backend.

PostgreSQL is reached at $GATEWAY_KIT_TEST_PG; every test gets a schema of its own. When the
server cannot be reached the PostgreSQL tests fail: a missing database is never a pass.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest

from gateway_kit import EventLog
from gateway_kit.log.postgres import conninfo
from tests.support.postgres import PG_URL, PgServer, pg_server


def _with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh, empty schema (dropped afterwards)."""
    schema = f"gk_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(conninfo(PG_URL), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _with_search_path(PG_URL, schema)
    finally:
        with psycopg.connect(conninfo(PG_URL), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


@pytest.fixture
def other_pg_url() -> Iterator[str]:
    """A second schema on the same server: another deployment's log."""
    with fresh_schema() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/gateway.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def log(log_url: str) -> Iterator[EventLog]:
    event_log = EventLog(log_url)
    try:
        yield event_log
    finally:
        event_log.close()


@pytest.fixture(scope="session")
def _throwaway_server() -> Iterator[PgServer]:
    with pg_server() as server:
        yield server


@pytest.fixture
def throwaway_pg(_throwaway_server: PgServer) -> PgServer:
    """A PostgreSQL server of the test session's own (`tests.support.postgres`), which a test
    may kill and start again; running when the test starts."""
    if not _throwaway_server.running():
        _throwaway_server.start()
    return _throwaway_server


@pytest.fixture
def throwaway_pg_url(throwaway_pg: PgServer) -> Iterator[str]:
    """A URL of a fresh schema on `throwaway_pg`."""
    schema = f"gk_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(throwaway_pg.conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield _with_search_path(throwaway_pg.url, schema)
    if not throwaway_pg.running():
        throwaway_pg.start()
    with psycopg.connect(throwaway_pg.conninfo, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
