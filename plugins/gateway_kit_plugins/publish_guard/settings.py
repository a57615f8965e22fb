"""The publish guard's settings, checked once when the gateway is made (ValueError otherwise)."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gateway_kit import ToolCall

from .limits import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_PATH_LENGTH,
    DEFAULT_PATHS,
    DEFAULT_WRITES,
    EXTENSIONS,
    PathLimits,
    WriteLimits,
)

# Said when a page is done, in the languages of the agents' users; matched case-insensitively.
CLAIM_PHRASES = (
    "页面已生成",
    "生成完成",
    "已生成",
    "已发布",
    "已保存至",
    "已保存到",
    "已上线",
    "page is ready",
    "is ready at",
    "published",
    "saved to",
    "is live",
    "has been created",
    "has been generated",
)
DEFAULT_MIN_BYTES = 64  # the smallest page worth the name ("<!doctype html>" alone is 15)
PLACEHOLDERS = frozenset({"user_id", "stream"})
KNOWN = frozenset(
    {
        "public_root", "claim_phrases", "write_tools", "min_bytes",
        "max_depth", "max_path_length", "extensions", "max_files", "max_bytes",
    }
)  # fmt: skip

UNKNOWN_SETTINGS = "unknown publish_guard settings: {names}; known: {known}"
BAD_ROOT = "public_root must be an absolute path, with {{user_id}} and {{stream}} only: {root!r}"
BAD_PHRASES = "claim_phrases must be a list of non-empty strings, got {value!r}"
BAD_TOOLS = (
    "write_tools must be a non-empty list of tool names or of "
    '{{"name", "path", "content", "when"}} objects, got {value!r}'
)
BAD_NUMBER = "{name} must be an integer of at least {least}, got {value!r}"
BAD_EXTENSIONS = (
    'extensions must be a list of file extensions such as "html" or ".css", got {value!r}'
)


@dataclass(frozen=True, slots=True)
class WriteTool:
    """A tool that writes a file: its name (``write_file`` also matches an extension's
    ``files__write_file``), the arguments holding the path and the content, and arguments it
    must have been called with (``{"command": "write"}``)."""

    name: str
    path: str = "path"
    content: str = "content"
    when: Mapping[str, str] = field(default_factory=dict)

    def written(self, call: ToolCall) -> tuple[str, str] | None:
        """(path, content) when `call` is this tool writing a file, and did not fail."""
        if call.failed or not (call.name == self.name or call.name.endswith(f"__{self.name}")):
            return None
        if any(call.arguments.get(key) != value for key, value in self.when.items()):
            return None
        path, content = call.arguments.get(self.path), call.arguments.get(self.content)
        if not isinstance(path, str) or not isinstance(content, str):
            return None
        return path, content


WRITE_TOOLS = (
    WriteTool("write_file"),
    WriteTool("developer__text_editor", content="file_text", when={"command": "write"}),
)


@dataclass(frozen=True, slots=True)
class GuardSettings:
    public_root: str
    claim_phrases: tuple[str, ...] = CLAIM_PHRASES
    write_tools: tuple[WriteTool, ...] = WRITE_TOOLS
    min_bytes: int = DEFAULT_MIN_BYTES
    paths: PathLimits = DEFAULT_PATHS
    writes: WriteLimits = DEFAULT_WRITES

    @property
    def tool_name(self) -> str:
        """The write tool a follow-up asks for."""
        return self.write_tools[0].name


def parse_settings(config: Mapping[str, Any]) -> GuardSettings | None:
    """The settings, or None (the guard is off) without a `public_root`."""
    unknown = sorted(set(config) - KNOWN)
    if unknown:
        raise ValueError(UNKNOWN_SETTINGS.format(names=unknown, known=sorted(KNOWN)))
    if config.get("public_root") is None:
        return None
    settings = GuardSettings(public_root=_root(config["public_root"]))
    if "claim_phrases" in config:
        settings = replace(settings, claim_phrases=_phrases(config["claim_phrases"]))
    if "write_tools" in config:
        settings = replace(settings, write_tools=_tools(config["write_tools"]))
    paths = PathLimits(
        max_depth=_number(config, "max_depth", DEFAULT_MAX_DEPTH, least=1),
        max_path_length=_number(config, "max_path_length", DEFAULT_MAX_PATH_LENGTH, least=1),
    )
    writes = WriteLimits(
        extensions=_extensions(config["extensions"]) if "extensions" in config else EXTENSIONS,
        max_files=_number(config, "max_files", DEFAULT_MAX_FILES, least=0),
        max_bytes=_number(config, "max_bytes", DEFAULT_MAX_BYTES, least=0),
    )
    return replace(
        settings,
        min_bytes=_number(config, "min_bytes", DEFAULT_MIN_BYTES, least=0),
        paths=paths,
        writes=writes,
    )


def _number(config: Mapping[str, Any], name: str, default: int, *, least: int) -> int:
    value = config.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(BAD_NUMBER.format(name=name, least=least, value=value))
    return value


def _extensions(value: object) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(BAD_EXTENSIONS.format(value=value))
    found: set[str] = set()
    for item in value:
        name = item.lower().removeprefix(".") if isinstance(item, str) else ""
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ValueError(BAD_EXTENSIONS.format(value=value))
        found.add(f".{name}")
    return frozenset(found)


def _root(value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/") or "\x00" in value:
        raise ValueError(BAD_ROOT.format(root=value))
    try:
        fields = list(string.Formatter().parse(value))
    except ValueError:
        raise ValueError(BAD_ROOT.format(root=value)) from None
    for _, name, spec, conversion in fields:
        if name is not None and (name not in PLACEHOLDERS or spec or conversion):
            raise ValueError(BAD_ROOT.format(root=value))
    if ".." in value.split("/"):
        raise ValueError(BAD_ROOT.format(root=value))
    return value.rstrip("/") or "/"


def _phrases(value: object) -> tuple[str, ...]:
    if (
        isinstance(value, str)
        or not isinstance(value, Sequence)
        or not all(isinstance(p, str) and p.strip() for p in value)
    ):
        raise ValueError(BAD_PHRASES.format(value=value))
    return tuple(p.strip().casefold() for p in value)


def _tools(value: object) -> tuple[WriteTool, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(BAD_TOOLS.format(value=value))
    return tuple(_tool(item, value) for item in value)


def _tool(item: object, value: object) -> WriteTool:
    if isinstance(item, str) and item:
        return WriteTool(item)
    if not isinstance(item, Mapping) or set(item) - {"name", "path", "content", "when"}:
        raise ValueError(BAD_TOOLS.format(value=value))
    names = [item.get("name"), item.get("path", "path"), item.get("content", "content")]
    when = item.get("when", {})
    if not all(isinstance(n, str) and n for n in names) or not (
        isinstance(when, Mapping) and all(isinstance(k, str) for k in when)
    ):
        raise ValueError(BAD_TOOLS.format(value=value))
    name, path, content = (str(n) for n in names)
    return WriteTool(name, path, content, dict(when))
