"""The default consumer of `bill_run`: the usage ledger, what each run cost per user and day.

Each bill the billing outbox delivers is recorded by its idempotency key, with the day's totals
of the stream's owner, in one transaction (`gateway_kit.usage.UsageLedger`): a bill delivered
again, after a failed delivery, a restart, or by another gateway process at the same moment,
adds nothing. ``GET {prefix}/usage`` and ``gateway-kit bills --user USER`` read the ledger.

It is on by default and takes no settings; ``Gateway(block_plugins=["usage_ledger"])`` turns
it off (the bills are still kept in the outbox, and your own ``bill_run`` still gets them).

A run is billed to its stream's owner (`gateway_kit.identity.owners.StreamOwners`). A stream
with no owner has nobody to bill: its bill is left out of the ledger, with a warning naming the
run.

Marked ``trylast``: a deployment's own ``bill_run`` (an invoice system, say) is called first;
whichever raises has the bill delivered again later, with the same key, and the ledger still
counts it once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from gateway_kit import hookimpl
from gateway_kit.hooks import PluginContext
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.usage import UsageLedger, entry_of

logger = logging.getLogger("gateway_kit.plugins.usage_ledger")

NO_SETTINGS = "usage_ledger takes no settings, got {names}"
NOBODY_TO_BILL = "run %s of stream %r is not in the usage ledger: the stream has no owner"


class UsageLedgerPlugin:
    def __init__(self) -> None:
        self.ledger: UsageLedger | None = None
        self.owners: StreamOwners | None = None

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        if config:
            raise ValueError(NO_SETTINGS.format(names=sorted(config)))
        if context.log is not None:
            self.ledger = UsageLedger(context.log)
            self.owners = StreamOwners(context.log)

    @hookimpl(trylast=True)
    def bill_run(self, run: Any, usage: Mapping[str, Any], idempotency_key: str) -> None:
        # Called in the billing pool's thread: the ledger's transaction may wait here.
        if self.ledger is None or self.owners is None:
            return  # no gateway log to keep a ledger in
        owner = self.owners.owner(run.stream)
        if owner is None:
            logger.warning(NOBODY_TO_BILL, run.run_id, run.stream)
            return
        self.ledger.record(entry_of(run, usage, idempotency_key, owner, time.time()))
