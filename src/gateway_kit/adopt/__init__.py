"""``gateway-kit adopt check``: whether wrapping an app in a `Gateway` changes its answers.

Recorded requests (a HAR file, or JSON lines) are replayed in process against the app alone
and against the app wrapped, and each pair of answers is compared, with what varies between
two runs of one app masked. Reading (`reading`, `har`, `jsonlines`), the two sides
(`target`), calling them within bounds (`call`, `threaded_wsgi`, `lifespan`), comparing
(`compare`, `body`, `masking`) and the replay itself (`replay`) are each a module.
"""

from __future__ import annotations

from .call import Answer, Limits
from .difference import Difference
from .recorded import BadRecording, Recorded
from .replay import Findings, Verdict, check
from .target import TargetError

__all__ = [
    "Answer",
    "BadRecording",
    "Difference",
    "Findings",
    "Limits",
    "Recorded",
    "TargetError",
    "Verdict",
    "check",
]
