"""The example that `gateway-kit demo` runs: a legacy-style Flask app wrapped by `Gateway`.

`create_app` is the Flask app (login with a session cookie, ``POST /api/tasks`` running a fake
agent turn in a background thread, the ``GET /api/tasks/<id>?from=<idx>`` poll, and a page
showing a conversation's live events). `build_gateway` wraps it, its events in an `EventLog`.
``examples/flask_legacy`` in the source tree shows the same app adopting gateway_kit step by step.
"""

from __future__ import annotations

from .app import create_app
from .gateway import build_gateway

__all__ = ["build_gateway", "create_app"]
