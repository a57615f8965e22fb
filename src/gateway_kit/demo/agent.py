"""The fake agent turn the example app runs in a background thread for each task.

It writes goose's event names, because those are what the log will hold once runs go through
goose: `Message` events (an assistant reply streams as many events sharing one `message_id`,
one chunk of text each), then `Finish`, or `Error` when the turn fails. A message starting with
``/fail`` makes the turn fail, to show what a failed task looks like.

``/publish NAME`` and ``/pretend NAME`` show a finish guard at work (the built-in
``publish_guard``): the agent says the page ``public/NAME.html`` is published without writing
it. Told by the guard what is missing (a follow-up turn), the first writes it in the user's
public folder, the app's ``PUBLIC_ROOT`` with ``{user_id}`` filled (the same template as the
guard's ``public_root``); the second never does.

``/confirm TOOL [ARGUMENTS]`` shows the legacy tool approval (`gateway_kit.demo.approvals`):
the turn writes ``tool_approval_required``, waits in its thread for the user's answer, writes
``tool_approval_resolved``, then says it ran the tool, or why not (``rejected``, ``timeout``,
or ``approval_missing`` when a restart lost the request).
"""

from __future__ import annotations

import functools
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..approvals.legacy import TOOL_APPROVAL_REQUIRED, TOOL_APPROVAL_RESOLVED
from ..exceptions import LogClosed
from ..log.event import ERROR, FINISH
from .approvals import APPROVED, ToolApprovalManager
from .tasks import EventWriter, TaskFollowUp

logger = logging.getLogger(__name__)

REPLY = (
    "You said: {message} — I am a fake agent. My reply streams in chunks, one event each, "
    "and ends with Finish."
)
FAIL_COMMAND = "/fail"
FAILURE = "the fake agent was asked to fail"
PUBLISH_COMMAND = "/publish"  # claims a page it has not written; writes it when told
PRETEND_COMMAND = "/pretend"  # claims a page and never writes it
PAGE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
CLAIM = "Done: the page is published at public/{name}.html"
# An item a follow-up prompt lists as missing, named under public/ (the user's public folder);
# the agent writes only a page right in that folder, confined to it by the page name's shape.
MISSING_ITEM = re.compile(r"^- (.+)$", re.MULTILINE)
PUBLIC_PREFIX = "public/"
PAGE_FILE = re.compile(r"[A-Za-z0-9_-]{1,64}\.html")
USER_ID = "{user_id}"
PAGE = (
    "<!doctype html>\n<title>{name}</title>\n<p>Written by the fake agent when it was told.</p>\n"
)
WROTE = "Sorry, I had not written it. Now the page is published at {pages}."
PRETENDED = "Done again: the page is published at {pages}."  # and still not written
COULD_NOT = "I cannot write anything: the pages stay as they are."
CONFIRM_COMMAND = "/confirm"  # asks the user's approval of a tool, then runs it or not
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
RAN = "I ran {tool}: done."
NOT_RUN = "I did not run {tool}: {why}."

# turn(write): one task's turn, writing its events through `write`.
TaskTurn = Callable[[EventWriter], None]


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def reply_text(message: str) -> str:
    command, _, name = message.partition(" ")
    if command in (PUBLISH_COMMAND, PRETEND_COMMAND) and PAGE_NAME.fullmatch(name.strip()):
        return CLAIM.format(name=name.strip())
    return REPLY.format(message=message)


def chunks_of(text: str) -> list[str]:
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + words[-1:]


def reply_chunks(message: str) -> list[str]:
    """The reply to `message`, cut into the chunks it streams as (word by word)."""
    return chunks_of(reply_text(message))


def run_turn(write: EventWriter, message: str, *, chunk_delay: float = 0.0) -> None:
    """Stream a reply to `message` through `write`; never raises."""
    stream_reply(
        write, lambda: reply_chunks(message), message.startswith(FAIL_COMMAND), chunk_delay
    )


def confirmed_tool(message: str) -> tuple[str, dict[str, Any]] | None:
    """The tool, and its arguments, that a ``/confirm`` message asks to run; else None."""
    command, _, rest = message.partition(" ")
    tool, _, arguments = rest.strip().partition(" ")
    if command != CONFIRM_COMMAND or not TOOL_NAME.fullmatch(tool):
        return None
    return tool, ({"command": arguments.strip()} if arguments.strip() else {})


def confirm_turn(
    write: EventWriter,
    tool: str,
    arguments: dict[str, Any],
    *,
    approvals: ToolApprovalManager,
    user: str,
    conversation_id: str,
    timeout: float,
    chunk_delay: float = 0.0,
) -> None:
    """The legacy way to run a tool the user must approve: ask (``tool_approval_required``),
    wait in this thread for `user`'s answer, say what came of it (``tool_approval_resolved``),
    then run the tool or say why not; never raises."""

    def ask_then_act() -> list[str]:
        approval_id = approvals.create_request(user, conversation_id, tool, arguments)
        ids = {"approval_id": approval_id, "id": approval_id, "conversation_id": conversation_id}
        write(
            TOOL_APPROVAL_REQUIRED,
            {**ids, "tool_name": tool, "arguments": arguments, "prompt": None},
        )
        outcome = approvals.wait(approval_id, timeout)
        # Nobody's answer is recorded: the client is told what came of it, not who decided.
        resolved = {"approved": outcome == APPROVED, "status": outcome, "decided_by": None}
        write(TOOL_APPROVAL_RESOLVED, {**ids, **resolved, "reason": None})
        if outcome == APPROVED:
            return chunks_of(RAN.format(tool=tool))
        return chunks_of(NOT_RUN.format(tool=tool, why=outcome))

    stream_reply(write, ask_then_act, False, chunk_delay)


def task_turn(
    config: Mapping[str, Any],
    approvals: ToolApprovalManager,
    message: str,
    *,
    user: str,
    conversation_id: str,
) -> TaskTurn:
    """The turn of `user`'s task that begins with `message`, in an app of `config`."""
    chunk_delay = config["TURN_CHUNK_DELAY"]
    asked = confirmed_tool(message)
    if asked is None:
        return functools.partial(run_turn, message=message, chunk_delay=chunk_delay)
    tool, arguments = asked
    return functools.partial(
        confirm_turn,
        tool=tool,
        arguments=arguments,
        approvals=approvals,
        user=user,
        conversation_id=conversation_id,
        timeout=config["TOOL_APPROVAL_TIMEOUT"],
        chunk_delay=chunk_delay,
    )


def public_folder(template: str | None, user: str) -> Path | None:
    """`user`'s public folder: `template` with ``{user_id}`` filled; None without a template
    or for a user id that is not one plain path segment."""
    if template is None or not user or user in (".", "..") or any(c in user for c in "/\\\x00"):
        return None
    return Path(template.replace(USER_ID, user))


def missing_pages(prompt: str) -> list[str]:
    """The names of the pages `prompt` lists as missing right in the public folder (each item
    ``- public/NAME.html``), each once."""
    names: list[str] = []
    for item in (found.strip() for found in MISSING_ITEM.findall(prompt)):
        name = item.removeprefix(PUBLIC_PREFIX)
        if item.startswith(PUBLIC_PREFIX) and PAGE_FILE.fullmatch(name) and name not in names:
            names.append(name)
    return names


def follow_up_turn(
    write: EventWriter,
    prompt: str,
    *,
    message: str,
    public_root: str | None,
    user: str,
    chunk_delay: float = 0.0,
) -> None:
    """The turn after a finish guard's veto (`prompt` lists what is missing) of `user`'s task
    that began with `message`: writes the missing pages in the user's public folder (the
    `public_root` template filled), unless the task only pretends, and says where they are
    published (so its last answer claims them again); never raises."""

    def write_pages() -> list[str]:
        folder = public_folder(public_root, user)
        names = [] if folder is None else missing_pages(prompt)
        if folder is None or not names:
            return chunks_of(COULD_NOT)
        pages = ", ".join(f"public/{name}" for name in names)
        if message.startswith(PRETEND_COMMAND):
            return chunks_of(PRETENDED.format(pages=pages))
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            (folder / name).write_text(PAGE.format(name=name), encoding="utf-8")
        return chunks_of(WROTE.format(pages=pages))

    stream_reply(write, write_pages, False, chunk_delay)


def task_follow_up(config: Mapping[str, Any], message: str, user: str) -> TaskFollowUp:
    """The follow-up turns of `user`'s task that began with `message`, in an app of `config`."""
    return functools.partial(
        follow_up_turn,
        message=message,
        public_root=config["PUBLIC_ROOT"],
        user=user,
        chunk_delay=config["TURN_CHUNK_DELAY"],
    )


def stream_reply(
    write: EventWriter, reply: Callable[[], list[str]], fail: bool, chunk_delay: float
) -> None:
    """Stream the chunks `reply()` answers, then `Finish` (`Error` after one chunk when `fail`)."""
    message_id = new_message_id()
    try:
        for chunk in reply():
            if chunk_delay:
                time.sleep(chunk_delay)  # so that a person watching sees it arrive
            write("Message", {"role": "assistant", "message_id": message_id, "text": chunk})
            if fail:
                write(ERROR, {"error": FAILURE})
                return
        write(FINISH, {"reason": "stop"})
    except LogClosed:
        logger.info("a fake agent turn stopped: the event log was closed (the server is stopping)")
    except Exception as exc:
        logger.exception("a fake agent turn failed")
        try:
            write(ERROR, {"error": str(exc)})
        except Exception:  # the store itself is failing; the thread has nowhere left to say it
            logger.exception("could not record the failure of a fake agent turn")
