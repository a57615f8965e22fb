"""One gateway process for multi-process tests.

    python -m tests.support.upstream_process PORT_FILE DB_URL GOOSE_URL SECRET

Serves a Gateway with a goose upstream on a free loopback port (written to PORT_FILE), with
short leases so that a killed process's sessions are taken over quickly.
"""

from __future__ import annotations

import sys

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream
from gateway_kit.upstream.goose.pump import PumpSettings
from tests.support.processes import serve_app

TAKEOVER = PumpSettings(lease_ttl=1.5, lost_run_grace=3.0, reconnect_delay=0.05, scan_interval=0.3)


def main() -> None:
    port_file, db_url, goose_url, secret = sys.argv[1:5]
    log = EventLog(db_url)
    gateway = Gateway(
        log=log,
        upstream=GooseUpstream(base_url=goose_url, secret_key=secret),
        allow_anonymous=True,
        settings=GatewaySettings(pumps=TAKEOVER),
    )
    serve_app(gateway, port_file)


if __name__ == "__main__":
    main()
