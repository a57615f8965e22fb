"""Reading the documentation from tests: a section under a heading, and the Python blocks in it."""

from __future__ import annotations

import re
from pathlib import Path

PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def section(document: Path, heading: str) -> str:
    """The text under `heading` up to the next heading of its level or above."""
    text = document.read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", text[start + 1 :], re.M)]
    return text[start : start + 1 + ends[1]] if len(ends) > 1 else text[start:]
