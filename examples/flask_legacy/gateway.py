"""The legacy app adopting gateway_kit: ``gateway-kit serve gateway:app --db sqlite:///gw.db``.

1. Mount: `Gateway` wraps the Flask app; every route of the app keeps working.
2. Events to the log: ``EVENT_LOG`` makes the app write its task events to the `EventLog`, each
   task's thread inside ``with owned_run(...)`` (so a task whose process dies ends with an
   ``Error`` instead of running for ever); the gateway answers the legacy
   ``GET /api/tasks/<id>?from=<idx>`` poll from the log, in the old shape, so unmodified clients
   keep working. With ``RUN_GUARDS``, each task is held to the gateway's finish guards, here
   the built-in ``publish_guard``: a task whose agent claims a page it never wrote gets a
   follow-up turn told what is missing, and ends flagged ``guard_failed`` if the page never
   comes (send ``/publish NAME`` or ``/pretend NAME``).
3. Clients switch to SSE: ``/conversations/<id>`` is a page reading
   ``/gateway/streams/<id>/events`` with `EventSource`, resuming by itself after any disconnect.
"""

from __future__ import annotations

import os
from pathlib import Path

from gateway_kit import EventLog, Gateway, LegacySurfaces
from gateway_kit.demo import create_app
from gateway_kit.demo.secret import database_key
from gateway_kit.settings import database_url

log = EventLog(database_url())  # $GATEWAY_KIT_DB, else sqlite:///gateway.db
# Cookies signed with a key of this database's ($GATEWAY_KIT_DEMO_SECRET_KEY when set): every
# worker signs alike, and restarts keep logins. A real app keeps its own SECRET_KEY.
flask_app = create_app({"SECRET_KEY": database_key(log)})
# Where the agent publishes pages, one folder per user ($GATEWAY_KIT_DEMO_PUBLIC_ROOT, else
# ./public): `{user_id}` is the conversation's owner, the logged-in user.
public_root = Path(os.environ.get("GATEWAY_KIT_DEMO_PUBLIC_ROOT", "public")).resolve()
flask_app.config["PUBLIC_ROOT"] = f"{public_root}/{{user_id}}"

# Step 2. Without this line the app keeps its events in its deques (step 1): it works either way.
flask_app.config["EVENT_LOG"] = log

# Who reads what: the app's session cookie (read with its SECRET_KEY), API tokens made with
# `gateway-kit tokens create USER`; each conversation is read by its owner only. The built-in
# finish guard `publish_guard` checks that the pages the agent claims are on disk, in the same
# folder the agent writes them to.
app = Gateway(
    flask_app,
    log=log,
    # The app's own paths the gateway answers for its unmodified legacy clients (each is logged
    # at start-up); every other path of the app is the app's, answered as without the gateway.
    legacy=LegacySurfaces(
        tasks="/api/tasks",  # the task poll, from the log, in the app's shape
        usage="/api/usage",
        socket_token="/api/socket-token",
        approvals="/api/plan-approvals/pending",
        csrf_token_route="/api/csrf-token",
    ),
    plugin_config={"publish_guard": {"public_root": flask_app.config["PUBLIC_ROOT"]}},
)

# The task threads' runs are held to the gateway's guards, with its lifecycle's limits.
flask_app.config["RUN_GUARDS"] = app.run_guards
