"""The app the end-to-end tests serve with a real uvicorn process.

A legacy-style Flask app wrapped by `Gateway`; the log URL and the gateway's options come from
the environment, set by `live_server.serve`.
"""

from __future__ import annotations

import json
import os

from flask import Flask, Response, jsonify

from gateway_kit import EventLog, Gateway, GatewaySettings
from tests.support.legacy_paths import EXAMPLE_LEGACY

LOG_URL_VAR = "GATEWAY_KIT_STREAMS_LOG_URL"
OPTIONS_VAR = "GATEWAY_KIT_STREAMS_OPTIONS"


def legacy_app() -> Flask:
    app = Flask("legacy")

    @app.get("/hello")
    def hello() -> Response:
        return jsonify(hello="from flask")

    @app.get("/api/tasks/<task_id>")
    def legacy_task(task_id: str) -> Response:
        # What the legacy app answers for a task the log does not know.
        return jsonify(task_id=task_id, served_by="flask")

    return app


def create() -> Gateway:
    options = json.loads(os.environ.get(OPTIONS_VAR, "{}"))
    # {"settings": {part: {setting: value}}}: JSON for settings=GatewaySettings(...)
    parts = GatewaySettings.parts()
    given = options.pop("settings", {})
    settings = GatewaySettings(**{part: parts[part](**values) for part, values in given.items()})
    return Gateway(
        legacy_app(),
        log=EventLog(os.environ[LOG_URL_VAR]),
        settings=settings,
        **{"allow_anonymous": True, **EXAMPLE_LEGACY, **options},
    )
