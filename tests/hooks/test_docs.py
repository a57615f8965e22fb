"""docs/plugin_hooks.md kept true to the hook specifications, and every hook kept tested.

Every hook of `gateway_kit.hooks.hookspecs` has one section headed ``### `name(arg, ...)` ``
with the spec's argument names in order, says whether it stops at the first non-None answer,
gives the failure value declared with its spec (its `HookPolicy`, which the gateway acts on),
and names the plugin timeout exactly when its answers are timed; the failures table gives the
same failure values; no such heading names a hook that does not exist. Every hook has a test
of its own: a test function somewhere under tests/ whose name contains the hook's name (this
file does not count). The stream-access rule of `authorize_subscription` is the module of
tests/plugin_dist/ as it is, and the Python examples compile.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway_kit.hooks import PROJECT, REFUSED, hookspecs
from gateway_kit.hooks.policy import RAISE, RETRY, FailedAs, HookPolicy, policy_of

TESTS = Path(__file__).resolve().parents[1]
DOCS = TESTS.parent / "docs" / "plugin_hooks.md"
DISTRIBUTION = TESTS / "plugin_dist"

HOOK_HEADING_START = "### `"
HOOK_HEADING = re.compile(r"### `(?P<name>\w+)\((?P<args>[^()]*)\)`")
SECTION_HEADING = re.compile(r"^#{1,3} ", re.MULTILINE)
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'\btitle="(?P<title>[^"]+)"')
FIRSTRESULT = "Stops at the first non-None answer (`firstresult`)."
EVERY_IMPLEMENTATION = "Every implementation is called"
FAILURE_VALUE = "Failure value: {value}"
FAILURES_HEADING = "## Failures\n"
EVERY_OTHER_HOOK = "every other hook"
PLUGIN_TIMEOUT = "`plugin_timeout`"
BUILT = {"__pycache__", "build", "dist"}


def hook_specs() -> dict[str, Callable[..., Any]]:
    return {
        name: function
        for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
        if getattr(function, f"{PROJECT}_spec", None) is not None
    }


SPECS = hook_specs()
DOCS_TEXT = DOCS.read_text()
PROSE = FENCE.sub("", DOCS_TEXT)  # a heading or a phrase inside an example does not count


def signature(hook: str) -> str:
    return f"{hook}({', '.join(inspect.signature(SPECS[hook]).parameters)})"


def hook_headings() -> list[str]:
    """Every heading that starts like a hook's, as written (without ``### `` and backticks)."""
    return [
        line.removeprefix(HOOK_HEADING_START).removesuffix("`")
        for line in PROSE.splitlines()
        if line.startswith(HOOK_HEADING_START)
    ]


def section(hook: str) -> str:
    start = PROSE.find(f"### `{signature(hook)}`\n")
    assert start >= 0, f"docs/plugins.md has no section of {hook}"
    following = SECTION_HEADING.search(PROSE, start + 1)
    return PROSE[start : following.start() if following else len(PROSE)]


def test_the_hookspecs_are_found() -> None:
    assert "authorize_subscription" in SPECS and "configure_plugin" in SPECS


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_every_hook_is_documented_with_its_signature(hook: str) -> None:
    expected = signature(hook)
    documented = [h for h in hook_headings() if h.split("(", 1)[0] == hook]
    assert documented, f"docs/plugins.md has no section headed ### `{expected}`"
    assert documented == [expected], f"docs/plugins.md: {documented} for ### `{expected}`"


def test_the_docs_document_no_hook_that_does_not_exist() -> None:
    headings = hook_headings()
    assert headings, "docs/plugins.md has no hook sections"
    malformed = [h for h in headings if not HOOK_HEADING.fullmatch(f"### `{h}`")]
    assert not malformed, f"not headed as ### `name(arg1, arg2)`: {malformed}"
    unknown = [h for h in headings if h.split("(", 1)[0] not in SPECS]
    assert not unknown, f"docs/plugins.md documents hooks that do not exist: {unknown}"


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_every_hook_section_says_whether_the_first_answer_wins(hook: str) -> None:
    text = section(hook)
    firstresult = getattr(SPECS[hook], f"{PROJECT}_spec")["firstresult"]
    said, unsaid = (
        (FIRSTRESULT, EVERY_IMPLEMENTATION) if firstresult else (EVERY_IMPLEMENTATION, FIRSTRESULT)
    )
    assert said in text, f"the section of {hook} should say {said!r}"
    assert unsaid not in text, f"the section of {hook} should not say {unsaid!r}"


# --- failure values, as each spec declares them -----------------------------------------------


def failure_value_in_words(policy: HookPolicy) -> str:
    """How docs/plugins.md writes the failure value of `policy`."""
    on_failure = policy.on_failure
    if on_failure is REFUSED:
        return "a refusal"
    if on_failure is RAISE or on_failure is RETRY:
        return "none"  # no value stands for the answer: the call stops, or is made again
    if isinstance(on_failure, FailedAs):
        return on_failure.described  # a value made for each failure
    return f"`{on_failure!r}`"


def declared_failure(hook: str) -> str:
    return failure_value_in_words(policy_of(SPECS[hook]))


def failures_table() -> dict[str, str]:
    """The table of the Failures section: what its first column names -> its failure value."""
    start = PROSE.find(FAILURES_HEADING)
    assert start >= 0, "docs/plugins.md has no Failures section"
    following = SECTION_HEADING.search(PROSE, start + 1)
    text = PROSE[start : following.start() if following else len(PROSE)]
    cells = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    return {row[0].strip().strip("`"): row[1].strip() for row in cells[1:]}  # not the header


def test_the_failure_values_are_read_from_the_specs() -> None:
    assert declared_failure("resolve_principal") == "a refusal"
    assert declared_failure("authorize_subscription") == "`False`"
    assert declared_failure("finish_guard") == "a `GuardFailure`"


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_every_hook_section_gives_the_failure_value_its_spec_declares(hook: str) -> None:
    said = FAILURE_VALUE.format(value=declared_failure(hook))
    assert said in " ".join(section(hook).split()), f"the section of {hook} should say {said!r}"


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_the_failures_table_gives_the_failure_value_its_spec_declares(hook: str) -> None:
    table = failures_table()
    value = declared_failure(hook)
    if policy_of(SPECS[hook]).on_failure is None:
        assert hook not in table, f"{hook} fails as None: the row {EVERY_OTHER_HOOK!r} says so"
        assert table.get(EVERY_OTHER_HOOK) == value
    else:
        assert table.get(hook) == value, f"the failures table should give {hook} {value}"


def test_the_failures_table_names_no_hook_that_does_not_exist() -> None:
    assert set(failures_table()) - {EVERY_OTHER_HOOK} <= set(SPECS)


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_a_hook_section_names_the_plugin_timeout_exactly_when_its_answers_are_timed(
    hook: str,
) -> None:
    timed = policy_of(SPECS[hook]).timed
    assert (PLUGIN_TIMEOUT in section(hook)) == timed, (
        f"the section of {hook} should {'' if timed else 'not '}name {PLUGIN_TIMEOUT}"
    )


# --- every hook tested -----------------------------------------------------------------------


def collected_names(tree: ast.Module) -> Iterator[str]:
    """The names pytest collects as tests: module-level functions and methods of Test classes."""
    for node in tree.body:
        items = [node]
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            items = node.body
        for item in items:
            function = isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            if function and item.name.startswith("test"):
                yield item.name


@functools.cache
def names_of_tests() -> frozenset[str]:
    names: set[str] = set()
    for path in TESTS.rglob("*.py"):
        if path.resolve() != Path(__file__).resolve():
            names.update(collected_names(ast.parse(path.read_text(), filename=str(path))))
    return frozenset(names)


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_every_hook_has_a_test_of_its_own(hook: str) -> None:
    assert any(hook in name for name in names_of_tests()), (
        f"no test function under tests/ has {hook!r} in its name"
    )


# --- the tutorial and the examples -----------------------------------------------------------


def titled_blocks() -> dict[str, str]:
    """The code blocks with a ``title="path"``, the last one of each path."""
    blocks: dict[str, str] = {}
    for fence in FENCE.finditer(DOCS_TEXT):
        title = TITLE.search(fence["info"])
        if title:
            blocks[title["title"]] = fence["body"]
    return blocks


def built(part: str) -> bool:
    """What tools leave in a source tree: caches, build output."""
    return part.startswith(".") or part in BUILT or part.endswith(".egg-info")


def distribution_files() -> dict[str, str]:
    files: dict[str, str] = {}
    for path in sorted(DISTRIBUTION.rglob("*")):
        relative = path.relative_to(DISTRIBUTION)
        if path.is_file() and not any(built(part) for part in relative.parts):
            files[relative.as_posix()] = path.read_text()
    return files


def test_the_stream_access_example_is_the_module_of_tests_plugin_dist() -> None:
    blocks, files = titled_blocks(), distribution_files()
    assert "pyproject.toml" in files
    assert sorted(blocks) == ["gateway_kit_example_guard.py"]  # the stream-access rule
    for name, text in blocks.items():
        assert text == files[name], f"docs/plugin_hooks.md shows another {name} than plugin_dist"


def test_every_python_example_compiles() -> None:
    examples = [f["body"] for f in FENCE.finditer(DOCS_TEXT) if f["info"].startswith("python")]
    assert examples
    for number, example in enumerate(examples, 1):
        compile(example, f"docs/plugins.md, Python example {number}", "exec")
