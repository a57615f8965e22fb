"""Alembic environment of gateway_kit's own tables.

Only tables named ``gateway_kit_*`` are ours; the host app may run Alembic on the same database,
so our revisions live in their own version table and autogenerate never looks at other tables.
The caller (``gateway_kit.log.migrate``) hands over a connection that already holds a lock.
"""

from __future__ import annotations

from alembic import context

from gateway_kit.log.schema import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    version_table=VERSION_TABLE,
    include_name=lambda name, type_, parent: type_ != "table" or name.startswith("gateway_kit_"),
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
