"""The key the demo signs its session cookies with: configured, or random and kept.

A key everyone can read signs cookies anyone can forge (any user, any CSRF token). So unless
``$GATEWAY_KIT_DEMO_SECRET_KEY`` names one, the demo makes a random key once per database and
keeps it in the log's meta table: every worker process over that database signs alike, and a
restart keeps everyone logged in. An app with no database gets a random key for its process.
"""

from __future__ import annotations

import logging
import os
import secrets

import sqlalchemy as sa

from ..log import EventLog
from ..log.schema import META

logger = logging.getLogger(__name__)

SECRET_KEY_VAR = "GATEWAY_KIT_DEMO_SECRET_KEY"
META_KEY = "demo_cookie_key"
KEY_BYTES = 32
FROM_VARIABLE = f"session cookies are signed with the key in ${SECRET_KEY_VAR}"
FROM_DATABASE = (
    "session cookies are signed with a random key made for this database and kept in it "
    f"({META}); set ${SECRET_KEY_VAR} to choose one"
)
FOR_PROCESS = (
    "session cookies are signed with a random key made for this process (logins end when it "
    f"stops); set ${SECRET_KEY_VAR} or SECRET_KEY to choose one"
)

meta = sa.table(META, sa.column("key"), sa.column("value"))
FIND = sa.select(meta.c.value).where(meta.c.key == META_KEY)


def configured_key() -> str | None:
    return os.environ.get(SECRET_KEY_VAR) or None


def process_key() -> str:
    logger.warning(FOR_PROCESS)
    return secrets.token_urlsafe(KEY_BYTES)


def database_key(log: EventLog) -> str:
    """The configured key, else the database's own (made on first use); says which."""
    key = configured_key()
    if key is not None:
        logger.info(FROM_VARIABLE)
        return key
    try:
        with log.tables.transaction() as conn:
            found = conn.execute(FIND).scalar()
            if found is None:
                found = secrets.token_urlsafe(KEY_BYTES)
                conn.execute(meta.insert().values(key=META_KEY, value=found))
    except sa.exc.IntegrityError:  # another process made it first: theirs is the key
        [(found,)] = log.tables.select(FIND)
    logger.info(FROM_DATABASE)
    return str(found)
