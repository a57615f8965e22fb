"""Apply gateway_kit's Alembic migrations to a database, under a lock.

Two processes starting together must not both create the tables: on PostgreSQL the migration
holds an advisory lock, on SQLite a ``BEGIN IMMEDIATE`` write lock, and the version is read
again once the lock is held.
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path

import sqlalchemy as sa

from .database import configure_sqlite, driver_url
from .schema import HEAD_REVISION, MIGRATION_LOCK_KEY, VERSION_TABLE

logger = logging.getLogger(__name__)

CREATING = "creating the schema of %s (revision %s)"
UPGRADING = "upgrading the schema of %s from revision %s to %s"


def shown(url: str | sa.URL) -> str:
    """`url` as a log line names it: its password hidden."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return str(url)


def migrations_path() -> Path:
    """Where the migration scripts are: inside the installed wheel, else the source checkout."""
    packaged = Path(str(resources.files("gateway_kit"))) / "_migrations"
    if (packaged / "env.py").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "alembic"
    if (checkout / "env.py").is_file():
        return checkout
    raise FileNotFoundError("gateway_kit's migration scripts are missing from this installation")


def make_engine(url: str) -> sa.Engine:
    engine = sa.create_engine(driver_url(url), poolclass=sa.NullPool)
    if engine.dialect.name == "sqlite":
        configure_sqlite(engine)  # transactional DDL; a concurrent migrator waits for this one
    return engine


def current_revision(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    row = conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").first()
    return None if row is None else str(row[0])


def upgrade(
    target: str | sa.Engine, revision: str = "head", *, shown_as: str | None = None
) -> str | None:
    """Bring the database at `target` (a URL, or an engine the caller disposes of) to
    `revision`; returns the revision it was at before. `shown_as` is the URL the log line
    names (an engine made with a connection factory knows only ``sqlite://``)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_path()))
    engine = make_engine(target) if isinstance(target, str) else target
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")
                conn.commit()
            try:
                # One transaction around the whole upgrade: on SQLite it is the write lock, and
                # Alembic, seeing a transaction already open, runs inside it.
                with conn.begin():
                    before = current_revision(conn)
                    if before != HEAD_REVISION or revision != "head":
                        said_revision = HEAD_REVISION if revision == "head" else revision
                        name = shown(shown_as) if shown_as is not None else shown(engine.url)
                        if before is None:
                            logger.info(CREATING, name, said_revision)
                        else:
                            logger.info(UPGRADING, name, before, said_revision)
                        config.attributes["connection"] = conn
                        command.upgrade(config, revision)
            finally:
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})")
                    conn.commit()
        return before
    finally:
        if isinstance(target, str):
            engine.dispose()
