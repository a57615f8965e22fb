"""The floors the import contract enforces are the ones the README's Layout and
docs/architecture.md show: the same folders, in the same order, grouped the same way."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import gateway_kit

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(gateway_kit.__file__).resolve().parent
CONTRACT_NAME = "the folders are floors: each imports only the floors below it"
# In the Layout block: a part of the package, two spaces in, a folder or a module.
LAYOUT_ENTRY = re.compile(r"^  ([a-z_]+)(?:/|\.py)(?:\s|$)")
# In the architecture page: a row of the floors table, `| 3 | `gateway/` | ...`.
FLOOR_ROW = re.compile(r"^\| (\d+) \| `([a-z_]+)(?:/|\.py)` \|", re.MULTILINE)

Floors = list[set[str]]


def contract_floors() -> Floors:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    [contract] = [c for c in contracts if c["name"] == CONTRACT_NAME]
    assert contract["containers"] == ["gateway_kit"]
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def section(document: Path, heading: str) -> str:
    """The text under `heading` (a line of its own), up to the next heading of its level."""
    text = document.read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    end = text.find(f"\n{level} ", start)
    return text[start:] if end < 0 else text[start:end]


def readme_floors() -> Floors:
    """The groups of the Layout block's `src/gateway_kit/` entries, blank lines between them."""
    block = section(ROOT / "README.md", "## Layout").split("```")[1]
    lines = block.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("src/gateway_kit/"))
    floors: Floors = [set()]
    for line in lines[start + 1 :]:
        if line and not line.startswith(" "):
            break  # the next top-level entry: the package's part of the block is over
        if not line.strip():
            floors.append(set())
        elif entry := LAYOUT_ENTRY.match(line):
            floors[-1].add(entry.group(1))
    return [floor for floor in floors if floor]


def architecture_floors() -> Floors:
    table = section(ROOT / "docs" / "architecture.md", "## Floors")
    rows = [(int(number), name) for number, name in FLOOR_ROW.findall(table)]
    numbers = [number for number, _ in rows]
    assert numbers == sorted(numbers), "the floors table goes top to bottom"
    floors: dict[int, set[str]] = {}
    for number, name in rows:
        floors.setdefault(number, set()).add(name)
    assert list(floors) == list(range(1, len(floors) + 1)), "floors are numbered 1, 2, 3, ..."
    return list(floors.values())


def package_parts() -> set[str]:
    """Every folder and module directly under src/gateway_kit/, but the package's own."""
    folders = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    return folders | modules


def test_the_contract_places_every_folder_and_module_of_the_package_once() -> None:
    placed = [name for floor in contract_floors() for name in floor]
    assert len(placed) == len(set(placed))
    assert set(placed) == package_parts()


def test_the_readme_layout_shows_the_contracts_floors() -> None:
    assert readme_floors() == contract_floors()


def test_the_architecture_page_shows_the_contracts_floors() -> None:
    assert architecture_floors() == contract_floors()
