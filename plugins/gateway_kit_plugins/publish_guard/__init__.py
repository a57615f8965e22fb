"""The fake-delivery guard: a run that says a page is published must have published it.

Agents answer "页面已生成 / the page is published at …/public/x.html" without having written the
file, or write the HTML and not the images it shows. After goose's ``Finish`` (or the end of
an app's own turn, `owned_run`) this `finish_guard` reads what each turn of the run ended by
saying (`final_assistant_text`: goose's messages and an app's flat ones alike), finds
the pages it claims (`claims.py`), writes the files the run's own write tool calls carried under
a ``public/`` segment when they are not on disk (`tool_calls`), and requires every claimed page
to be there, no smaller than a stub, with every local image, stylesheet and script it references
(`assets.py`). What is missing comes back as a `GuardVeto` naming exactly those paths, each
as ``public/<path under the root>`` (`public_path`): the veto goes into the follow-up prompt
and into the events every client of the stream reads, which never name the server's own path
of the root. The run gets a follow-up turn asking for them, and a write it makes to a path
under a ``public`` segment is written to the root; an answer that claims nothing is never
vetoed.

Only a write known to have run is written (`approvals.py`): never one whose approval was
rejected, expired or voided, whose result says it was declined, or whose approval was asked
for and has no outcome. Only the files a page needs, within per-run caps, at paths no deeper
or longer than the limits (`limits.py`); a refused write is logged and leaves nothing behind.

Off until its one setting is given::

    Gateway(..., plugin_config={"publish_guard": {"public_root": "/srv/ms/{user_id}/public"}})

- ``public_root``: where a run's public pages live; ``{user_id}`` is the stream's owner
  (`StreamOwners`), ``{stream}`` the stream. Each must fill one path segment (no ``/``, not
  ``..``): otherwise, or for a stream without an owner, the run is not checked (a warning says
  why).
- ``claim_phrases``: what says a page is done (defaults in Chinese and English: `CLAIM_PHRASES`).
  A link to a page (a URL, an absolute path, a Markdown link) is a claim without them.
- ``write_tools``: the tools whose calls are materialized: names (arguments ``path`` and
  ``content``), or ``{"name", "path", "content", "when"}`` objects. Default: ``write_file``, and
  goose's ``developer__text_editor`` called with ``{"command": "write"}`` (``path``,
  ``file_text``). A name also matches an extension's prefixed tool (``files__write_file``).
- ``min_bytes``: a claimed page smaller than this is a stub, as good as missing (64).
- ``max_depth`` (32 segments) and ``max_path_length`` (1024 bytes): how deep and how long a
  path under the root may be; a claimed page past them is missing, a write past them refused.
- ``extensions``: the kinds of file written (`limits.EXTENSIONS`: pages, styles, scripts, JSON,
  text, images, fonts); ``max_files`` (20) and ``max_bytes`` (4 MiB): what one run may write.

Nothing is read or written outside the root, whatever the agent's text or tool calls say:
``..`` above it, absolute paths elsewhere and symlinks leading out of it are refused and named
in a warning (`confinement.py`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from gateway_kit import Event, GuardVeto, StreamOwners, hookimpl
from gateway_kit.hooks import PluginContext

from .checking import KnownPages, answers, check, public_writes
from .claims import Refused, claimed_pages, public_path
from .confinement import PublicRoot
from .settings import CLAIM_PHRASES, GuardSettings, parse_settings

__all__ = ["CLAIM_PHRASES", "PublishGuard"]

logger = logging.getLogger("gateway_kit.plugins.publish_guard")

MISSING = (
    "pages or files your answer points to are missing from the public folder (or are empty "
    "stubs): write each of them, with its full content, with the {tool} tool, at the path "
    "listed under your public/ folder"
)
REFUSED = "publish_guard: run %s: refused %r under %s: %s"
NO_ROOT = "publish_guard: run %s is not checked: %s"
NO_OWNER = "stream {stream!r} has no owner to fill {{user_id}} with"
NOT_A_SEGMENT = "{name} {value!r} cannot be one segment of a path"
OUTSIDE = "{root!r} resolves outside {base!r}"
MATERIALIZED = "publish_guard: run %s: wrote %s from the run's own write calls"


def _veto(settings: GuardSettings, missing: Sequence[str]) -> GuardVeto | None:
    """What the guard answers when `missing` (as named to the agent) is not on disk."""
    return GuardVeto(MISSING.format(tool=settings.tool_name), missing=missing) if missing else None


class PublishGuard:
    def __init__(self) -> None:
        self.settings: GuardSettings | None = None
        self.owners: StreamOwners | None = None
        self.known = KnownPages()

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        self.settings = parse_settings(config)
        if context.log is not None:
            self.owners = StreamOwners(context.log)

    @hookimpl(trylast=True)
    def finish_guard(self, run: Any, events: Sequence[Event]) -> GuardVeto | None:
        settings = self.settings
        if settings is None:
            return None
        pages, refused = claimed_pages(answers(events), settings.claim_phrases)
        writes, refused_writes = public_writes(events, settings)
        refused += refused_writes
        if not pages and not writes:
            self._refused(run, refused, settings.public_root)
            return None
        try:
            shown = self.root(run.stream, settings.public_root)
        except ValueError as exc:
            logger.warning(NO_ROOT, run.run_id, exc)
            return None
        if not writes.within and not os.path.isdir(shown):
            # Nothing to write and no root yet (a user's first claim): the pages are missing.
            self._refused(run, refused + writes.over, shown)
            return _veto(settings, [public_path(page) for page in pages])
        # The run's own writes may go to a root not made yet: it is under the template's fixed
        # part (checked above), so it is made with the first file written, as the agent's
        # write tool would.
        with PublicRoot(shown, settings.paths) as root:
            found = check(root, pages, writes, settings.min_bytes, self.known)
        if found.materialized:
            logger.info(MATERIALIZED, run.run_id, ", ".join(found.materialized))
        self._refused(run, refused + found.refused, shown)
        return _veto(settings, found.missing)

    def root(self, stream: str, template: str) -> str:
        """The public root of `stream`'s runs; ValueError when it cannot be filled safely."""
        values = {"stream": stream, "user_id": ""}
        if "{user_id}" in template:
            owner = self.owners.owner(stream) if self.owners is not None else None
            if owner is None:
                raise ValueError(NO_OWNER.format(stream=stream))
            values["user_id"] = owner
        for name, value in values.items():
            if f"{{{name}}}" in template and not _one_segment(value):
                raise ValueError(NOT_A_SEGMENT.format(name=name, value=value))
        shown = template.format_map(values)
        # What was filled in must not lead elsewhere through a symlink either: the root stays
        # under the fixed part of the template.
        base = template.split("{", 1)[0].rsplit("/", 1)[0] or "/"
        real_base, real_root = os.path.realpath(base), os.path.realpath(shown)
        if os.path.commonpath([real_base, real_root]) != real_base:
            raise ValueError(OUTSIDE.format(root=shown, base=base))
        return shown

    @staticmethod
    def _refused(run: Any, refused: Sequence[Refused], root: str) -> None:
        for exc in refused:
            logger.warning(REFUSED, run.run_id, exc.path, root, exc.why)


def _one_segment(value: str) -> bool:
    return bool(value) and value not in (".", "..") and not any(c in value for c in "/\\\x00")
