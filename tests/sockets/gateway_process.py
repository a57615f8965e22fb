"""One gateway process with Socket.IO for multi-process tests.

    python -m tests.sockets.gateway_process PORT_FILE DB_URL REDIS_URL CHANNEL

Serves a strict Gateway around the demo's Flask app (whose routes take the gateway's
principal, an API token's user here) on a free loopback port (written to PORT_FILE); its
Socket.IO state crosses processes through Redis, on a channel of the test's own.
"""

from __future__ import annotations

import sys

from gateway_kit import EventLog, Gateway, GatewaySettings, SocketSettings
from gateway_kit.demo import create_app
from tests.support.processes import serve_app


def main() -> None:
    port_file, db_url, redis_url, channel = sys.argv[1:5]
    log = EventLog(db_url)
    flask_app = create_app({"TURN_CHUNK_DELAY": 0})
    flask_app.config["EVENT_LOG"] = log
    gateway = Gateway(
        flask_app,
        log=log,
        settings=GatewaySettings(
            sockets=SocketSettings(redis_url=redis_url, redis_channel=channel)
        ),
    )
    serve_app(gateway, port_file)


if __name__ == "__main__":
    main()
