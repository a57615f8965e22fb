"""What the README and docs/ say is what the code does: the names their code uses exist, the
built-in plugins they list are the ones that load, the tables they name are the ones made. And a
reader finds every page: the README links each one, and every relative link of the README and
docs/ leads to a file that exists, and to a heading it has when it names one."""

from __future__ import annotations

import ast
import builtins
import re
import unicodedata
from pathlib import Path

import sqlalchemy as sa

from gateway_kit import EventLog
from gateway_kit.hooks import BUILT_IN, Plugins
from gateway_kit.log.schema import VERSION_TABLE
from tests.support.docs import PYTHON_BLOCK, section

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PLUGINS_DOC = ROOT / "docs" / "plugins.md"
PLUGIN_HOOKS_DOC = ROOT / "docs" / "plugin_hooks.md"
WRITING_PLUGINS_DOC = ROOT / "docs" / "writing_plugins.md"
TESTING_PLUGINS_DOC = ROOT / "docs" / "testing_plugins.md"
LOG_DOC = ROOT / "docs" / "log.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
CONSOLE_BLOCK = re.compile(r"^```console\n(.*?)^```", re.DOTALL | re.MULTILINE)
TABLE_NAME = re.compile(r"\bgateway_kit_[a-z_]+\b")
FENCE = re.compile(r"^ *```.*?^ *```", re.DOTALL | re.MULTILINE)
# [text](target) outside code: the target up to a space (a title) or the closing parenthesis.
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?P<target>[^)\s]+)[^)]*\)")
HEADING = re.compile(r"^#{1,6} +(?P<title>.+?) *#*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:, ...
# Objects of the reader's own that the examples stand in for: their app, their secrets, their
# plugins, a task of their app. Anything else a block uses must be imported or made in it.
READERS_OWN = {
    "BASE",
    "GOOSE_SECRET",
    "TOKEN",
    "agent_turn",
    "app",
    "client",
    "last_seen_seq",
    "log",
    "my_acl",
    "my_sso",
    "task",
    "upstream",
}


def names_of(block: str) -> tuple[set[str], set[str]]:
    """(names the block binds, names it reads)."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(block, "<block>", "exec", flags=flags)
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)  # `except ValueError as exc`
    return bound, read


def test_code_blocks_use_only_what_they_import_or_make() -> None:
    unknown = []
    for document in DOCUMENTS:
        bound = set(dir(builtins)) | READERS_OWN
        for block in PYTHON_BLOCK.findall(document.read_text(encoding="utf-8")):
            made, read = names_of(block)
            bound |= made  # a later block of the document may use it
            unknown += [f"{document.name}: {name}" for name in sorted(read - bound)]
    assert not unknown, f"code blocks use names that nothing defines: {unknown}"


def test_the_log_page_names_every_table_the_migrations_make(log_url: str) -> None:
    with EventLog(log_url) as log:
        made = set(sa.inspect(log.tables.engine).get_table_names())
    assert VERSION_TABLE in made
    named = set(TABLE_NAME.findall(section(LOG_DOC, "## Schema and migrations")))
    assert named == made


def built_ins() -> dict[str, tuple[str, ...]]:
    """Each built-in plugin's name and hooks, as the plugin manager loads them."""
    infos = Plugins(load_entry_points=False).describe()
    return {info.name: info.hooks for info in infos if info.source.kind == BUILT_IN}


def test_the_plugins_doc_names_every_built_in_plugin() -> None:
    expected = built_ins()
    assert len(expected) > 1
    registering = section(PLUGINS_DOC, "## Built-in plugins")
    assert [name for name in expected if f"`{name}`" not in registering] == []


def plugins_listings() -> list[list[str]]:
    """The lines printed by each `$ gateway-kit plugins` of a console block, header first."""
    listings = []
    for document in DOCUMENTS:
        for block in CONSOLE_BLOCK.findall(document.read_text(encoding="utf-8")):
            commands = re.split(r"^\$ ", block, flags=re.M)
            listings += [
                command.splitlines()[1:]
                for command in commands
                if command.startswith("gateway-kit plugins\n")
            ]
    return listings


def test_every_plugins_listing_in_the_docs_shows_the_built_ins_that_load() -> None:
    expected = built_ins()
    listings = plugins_listings()
    assert len(listings) > 1
    for listing in listings:
        rows = [re.split(r"\s{2,}", line) for line in listing[1:]]
        shown = {
            name: tuple(hooks.split(", "))
            for name, source, hooks in rows
            if source.startswith(BUILT_IN)
        }
        assert shown == expected


# --- links -----------------------------------------------------------------------------------


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: its text in lower case, without markup or
    punctuation but hyphens and underscores, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "").lower()
    kept = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """The anchors of a document's headings; a repeated one gets -1, -2, ... as on GitHub."""
    found: set[str] = set()
    for match in HEADING.finditer(FENCE.sub("", document.read_text(encoding="utf-8"))):
        base = anchor(match["title"])
        name, number = base, 0
        while name in found:
            number += 1
            name = f"{base}-{number}"
        found.add(name)
    return found


def relative_links(document: Path) -> list[str]:
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # a link shown in code is no link
    return [m["target"] for m in LINK.finditer(text) if not EXTERNAL.match(m["target"])]


def test_the_link_checks_read_headings_as_github_does() -> None:
    assert anchor("`resolve_principal(scope)`") == "resolve_principalscope"
    assert anchor("The built-in `publish_guard`") == "the-built-in-publish_guard"
    assert anchor("Held to the gateway's finish guards") == "held-to-the-gateways-finish-guards"
    assert anchor("2. Move the event writes to the log") == "2-move-the-event-writes-to-the-log"
    assert "adopting-gateway_kit-one-route-at-a-time" in anchors(README)
    assert any("#" in link for link in relative_links(README))


def test_every_relative_link_leads_to_a_file_and_a_heading_it_has() -> None:
    broken = []
    for document in DOCUMENTS:
        for link in relative_links(document):
            path, _, fragment = link.partition("#")
            target = (document.parent / path).resolve() if path else document
            if not target.exists():
                broken.append(f"{document.name}: {link} (no such file)")
            elif fragment and target.suffix == ".md" and fragment not in anchors(target):
                broken.append(f"{document.name}: {link} (no such heading)")
    assert not broken, f"links that lead nowhere: {broken}"


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {(README.parent / link.partition("#")[0]).resolve() for link in relative_links(README)}
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert len(pages) > 10
    assert [page.name for page in pages if page.resolve() not in linked] == []
