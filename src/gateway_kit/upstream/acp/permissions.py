"""`session/request_permission`: the agent asks before it runs a tool, the gateway decides.

The decision comes from a pluggable async callback, given a `PermissionRequest`. It answers
with the kind of option it chooses (``allow_once``, ``allow_always``, ``reject_once``,
``reject_always``) or None for ``cancelled``. The option is chosen by its kind, never by its
id: goose's ids are the kinds, claude-agent-acp's are ``allow``, ``reject``, ...; an "always"
the agent does not offer falls back to its "once", and a kind it offers neither way answers
``cancelled``, so a rejection can never select an allowing option.

The default callback, `deny`, rejects every request. A request the turn's cancel, the
connection's end or the gateway's shutdown overtakes is answered ``cancelled``; the callback is
then cancelled, `withdrawn` saying why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...types import JSONObject
from .tools import meta_tool_name, tool_arguments, tool_name

ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"
REJECT_ALWAYS = "reject_always"
OPTION_KINDS = (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS)
FALLBACK = {ALLOW_ALWAYS: ALLOW_ONCE, REJECT_ALWAYS: REJECT_ONCE}
CANCELLED = "cancelled"


@dataclass(slots=True)
class PermissionRequest:
    """What the agent asks about: a tool call and the options it offers.

    :param tool_call: the request's ``toolCall`` as the agent sent it.
    :param options: the options as sent: ``{"optionId", "name", "kind"}``.
    :param announced: what the agent said of the same tool call in its updates so far (its
        ``_meta`` often names the tool only there), or None.
    :param withdrawn: set when the gateway answered ``cancelled`` itself, saying why.
    """

    session_id: str
    tool_call: JSONObject
    options: list[JSONObject]
    announced: JSONObject | None = None
    meta: JSONObject | None = None
    withdrawn: str | None = field(default=None)

    @property
    def tool_call_id(self) -> str:
        return str(self.tool_call.get("toolCallId", ""))

    @property
    def _described(self) -> JSONObject:
        return {**(self.announced or {}), **self.tool_call}

    @property
    def tool_name(self) -> str:
        """The tool's name: from the call's `_meta`, here or as announced, else its title."""
        for said in (self.tool_call, self.announced or {}):
            named = meta_tool_name(said.get("_meta"))
            if named:
                return named
        return tool_name(self._described)

    @property
    def arguments(self) -> JSONObject:
        return tool_arguments(self._described)

    @property
    def kinds(self) -> list[str]:
        return [str(option.get("kind")) for option in self.options]


PermissionHandler = Callable[[PermissionRequest], Awaitable[str | None]]


async def deny(request: PermissionRequest) -> str | None:
    """Reject every request: the default until someone decides."""
    return REJECT_ONCE


def choose_option(options: Sequence[Mapping[str, Any]], kind: str | None) -> str | None:
    """The id of the option of `kind` (or its "once" variant); None: answer ``cancelled``."""
    if kind is None:
        return None
    for wanted in (kind, FALLBACK.get(kind)):
        for option in options:
            if wanted is not None and option.get("kind") == wanted:
                option_id = option.get("optionId")
                if isinstance(option_id, str):
                    return option_id
    return None
