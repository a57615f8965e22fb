"""Names of the log's tables; the tables themselves are made by the Alembic migrations."""

from __future__ import annotations

EVENTS = "gateway_kit_events"
META = "gateway_kit_meta"
# Each stream's head pos as retention last saw it: where pos goes on once a stream's events
# are all deleted (so that no pos is handed out twice in a stream).
STREAM_HEADS = "gateway_kit_stream_heads"
VERSION_TABLE = "gateway_kit_alembic_version"
# The newest migration: a log whose version table says otherwise is upgraded on open.
HEAD_REVISION = "0015"

COLUMNS = "seq, stream, pos, run_id, type, data, upstream_event_id, created_at"

# Revision 0001's append lock, one key for the whole database ("gk" + "log").
ADVISORY_LOCK_KEY = 0x676B_6C6F67
# Appends take their transaction id and seqs under (APPEND_LOCK_CLASS,
# hashtext(current_schema())), one lock per log. Appends lock (STREAM_LOCK_CLASS,
# hashtext(stream)) for each stream they write, and retention for each it prunes, until they
# commit.
APPEND_LOCK_CLASS = 0x676B
STREAM_LOCK_CLASS = 0x6773
# Every process listening for the log's commits holds (LISTENER_LOCK_CLASS,
# hashtext(current_schema())) shared, so that writers can tell whether anyone listens at all.
LISTENER_LOCK_CLASS = 0x676C
# Whoever appends a run's terminal event holds (RUN_END_LOCK_CLASS, hashtext(run_id)) until
# it commits, so two processes cannot both end one run.
RUN_END_LOCK_CLASS = 0x6772
# Whoever records a run a user starts holds (RUN_STARTER_LOCK_CLASS, hashtext(user_id)) until
# it commits, so that two processes cannot both count that user's active runs below the limit.
RUN_STARTER_LOCK_CLASS = 0x6775
NOTIFY_CHANNEL = "gateway_kit_events"
MIGRATION_LOCK_KEY = 0x676B_6D6967
