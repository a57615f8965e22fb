"""Databases a command's result outlives: an in-memory SQLite one (``sqlite://``,
``sqlite:///``, ``sqlite:///:memory:``) lives only as long as the process that opens it.

A command that opens the database for its own run and exits would write what vanishes with it
(tables, a token, an owner) or read what no other process can have written. Each such command
names why in its parser's defaults (`IN_MEMORY_KEY`), and `refuse_in_memory` turns that into
one line before the database is opened.
"""

from __future__ import annotations

import argparse

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from ..exceptions import SettingsError

IN_MEMORY_KEY = "in_memory_refused"
IN_MEMORY = (
    "--db {url} is an in-memory database, which lives only as long as this command: {why}; "
    "name a database file (sqlite:///gateway.db) or a PostgreSQL database"
)


def in_memory(url: str) -> bool:
    """Whether `url` names an in-memory SQLite database (as `EventLog` opens it)."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        return False
    return parsed.get_backend_name() == "sqlite" and (parsed.database or ":memory:") == ":memory:"


def refuses_in_memory(parser: argparse.ArgumentParser, why: str) -> None:
    """Make `parser`'s command refuse an in-memory ``--db``, saying `why` it would be useless."""
    parser.set_defaults(**{IN_MEMORY_KEY: why})


def refuse_in_memory(args: argparse.Namespace) -> None:
    """`SettingsError` when the command refuses an in-memory database and ``--db`` names one."""
    why = getattr(args, IN_MEMORY_KEY, None)
    url = getattr(args, "db", None)
    if why and url and in_memory(url):
        raise SettingsError(IN_MEMORY.format(url=url, why=why))
