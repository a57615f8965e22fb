"""What the README and docs/ show in code works as shown: every import of gateway_kit in their
Python blocks, and every class of gateway_kit they name, importable from `gateway_kit`."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import gateway_kit

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# Not after a dot: `httpx.Request` and `respx.Router` say whose class they are; not beside a
# hyphen: `X-Tmux-Session-Id` and `Retry-After` are headers' names.
CLASS_NAME = re.compile(r"(?<![.\w-])[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*\b(?!-)")


def python_blocks(document: Path) -> list[str]:
    return PYTHON_BLOCK.findall(document.read_text(encoding="utf-8"))


def is_ours(module: str) -> bool:
    return module == "gateway_kit" or module.startswith("gateway_kit.")


def imports_of(block: str) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a block, however many lines it takes."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(block, "<block>", "exec", flags=flags)
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def documented_imports() -> list[tuple[str, str, list[str]]]:
    """(document, module, names) for every import of gateway_kit in a Python block."""
    found = []
    for document in DOCUMENTS:
        for block in python_blocks(document):
            for statement in imports_of(block):
                if isinstance(statement, ast.ImportFrom):
                    if statement.level == 0 and is_ours(statement.module or ""):
                        names = [alias.name for alias in statement.names]
                        found.append((document.name, statement.module or "", names))
                else:
                    found += [
                        (document.name, alias.name, [])
                        for alias in statement.names
                        if is_ours(alias.name)
                    ]
    return found


def relatively_imported() -> set[str]:
    """The names a block imports from a module beside it (`from .claims import Refused`): a
    plugin's own modules, shown as the plugin's code is, whatever gateway_kit also names so."""
    return {
        alias.asname or alias.name
        for document in DOCUMENTS
        for block in python_blocks(document)
        for statement in imports_of(block)
        if isinstance(statement, ast.ImportFrom) and statement.level > 0
        for alias in statement.names
    }


def package_classes() -> set[str]:
    """The public classes defined at the top level of any module of gateway_kit."""
    package = Path(gateway_kit.__file__).parent
    names = set()
    for source in package.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        names |= {
            node.name
            for node in tree.body
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
        }
    return names


def documented_code() -> str:
    """Every Python block and every inline code span of the documents, as one text."""
    parts = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        parts += python_blocks(document)
        parts += CODE_SPAN.findall(PYTHON_BLOCK.sub("", text))
    return "\n".join(parts)


def test_the_documents_import_gateway_kit() -> None:
    # Guards the parsing above: a test that found no import would prove nothing.
    modules = {module for _, module, _ in documented_imports()}
    assert {"gateway_kit", "gateway_kit.testing"} <= modules


@pytest.mark.parametrize(
    ("document", "module", "names"),
    documented_imports(),
    ids=lambda value: value if isinstance(value, str) else ",".join(value),
)
def test_every_documented_import_works_as_shown(
    document: str, module: str, names: list[str]
) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{document}: `from {module} import` cannot import {missing}"


def test_every_class_the_documents_name_is_exported_from_gateway_kit() -> None:
    imported_elsewhere = {
        name
        for _, module, names in documented_imports()
        if module != "gateway_kit"
        for name in names
    }
    named = set(CLASS_NAME.findall(documented_code())) & package_classes()
    imported_elsewhere |= relatively_imported()
    missing = sorted(named - imported_elsewhere - set(gateway_kit.__all__))
    assert not missing, f"named in the README or docs/, not importable from gateway_kit: {missing}"
