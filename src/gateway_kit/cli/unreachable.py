"""A database the command line cannot open, said in one line: which one, and why."""

from __future__ import annotations

import argparse
import sqlite3

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from ..exceptions import DatabaseUnavailable

UNREACHABLE_ERRORS = (
    sqlite3.OperationalError,
    psycopg.OperationalError,
    sa.exc.OperationalError,
    DatabaseUnavailable,
)
CANNOT_OPEN = "cannot use the database {url}: {reason}"
SQLITE_HINT = " (does its folder exist, and may this user write there?)"


def unreachable_message(args: argparse.Namespace, exc: BaseException) -> str:
    url = getattr(args, "db", None) or "(none given)"
    error = exc.orig if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None else exc
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    reason = lines[0] if lines else type(error).__name__
    if isinstance(error, sqlite3.OperationalError) and "unable to open" in reason:
        reason += SQLITE_HINT
    return CANNOT_OPEN.format(url=shown(url), reason=reason)


def shown(url: str) -> str:
    """`url` with its password, if any, hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url
