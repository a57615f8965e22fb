"""Usage: what each user's runs cost, per UTC day, as the ``usage_ledger`` plugin records it
from the bills of ended runs."""

from .ledger import UsageEntry, UsageLedger, UsageTotals, entry_of

__all__ = ["UsageEntry", "UsageLedger", "UsageTotals", "entry_of"]
