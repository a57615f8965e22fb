"""One gateway process over the fake ACP agent, for tests that kill it.

    python -m tests.support.acp_process PORT_FILE DB_URL STATE_DIR

Serves a Gateway whose upstream is the fake ACP agent (its sessions kept under STATE_DIR, so
that another process's agent can load them), with short leases so that a killed process's
runs are ended quickly.
"""

from __future__ import annotations

import sys

from gateway_kit import AcpUpstream, EventLog, Gateway, GatewaySettings, PumpSettings
from gateway_kit.testing.fake_acp_agent import MODULE
from tests.support.processes import serve_app

QUICK = PumpSettings(lease_ttl=1.5, scan_interval=0.3)


def main() -> None:
    port_file, db_url, state_dir = sys.argv[1:4]
    upstream = AcpUpstream(command=[sys.executable, "-m", MODULE, "--state-dir", state_dir])
    gateway = Gateway(
        log=EventLog(db_url),
        upstream=upstream,
        allow_anonymous=True,
        settings=GatewaySettings(pumps=QUICK),
    )
    serve_app(gateway, port_file)


if __name__ == "__main__":
    main()
