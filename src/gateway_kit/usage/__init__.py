"""Usage: what each user's runs cost, per UTC day, as the ``usage_ledger`` plugin records it
from the bills of ended runs, and the routes that answer a user's own totals."""

from .ledger import UsageEntry, UsageLedger, UsageTotals, entry_of
from .routes import UsageRoutes

__all__ = ["UsageEntry", "UsageLedger", "UsageRoutes", "UsageTotals", "entry_of"]
