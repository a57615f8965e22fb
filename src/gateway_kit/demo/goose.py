"""The demo's simulated goose: a `FakeGoose` the gateway reaches in-process, typing slowly.

The gateway talks to it exactly as to a real goosed: a `GooseUpstream` sends HTTP requests and
reads ``/sessions/{id}/events`` as SSE, and the session pump copies every goose event into the
log. Only the transport differs: `FakeGoose.client()` hands each request to the fake ASGI app on
the event loop that serves the gateway, instead of a socket. So the demo needs no second port
to choose, print or free, and no second server to stop: the fake's turns are tasks of the one
loop uvicorn runs, and `SimulatedGoose.aclose` ends them when the demo stops.

Every reply is a small scripted turn (`demo_turn`): a few words typed slowly, a tool call with
its result, then the answer. A few messages provoke the built-in policies, to watch them work:

- ``/fail`` ends with goose's `Error`, which nothing recovers;
- ``/publish NAME`` says the page ``public/NAME.html`` is published without writing it:
  ``publish_guard`` asks for it in a follow-up turn, whose ``write_file`` call carries the page
  (the guard writes it from that call, as it would for a real agent's lost write);
- ``/pretend NAME`` claims the page the same way and never writes it, follow-up after follow-up,
  until the guard gives up: ``guard_failed``, then a `Finish` flagged so;
- ``/image`` reads a screenshot and fails as a text-only model does (`TEXT_ONLY_MODEL_ERROR`):
  ``visual_fallback`` retries in a clean session without the image tool, from the text;
- ``/approve COMMAND`` asks to run ``COMMAND`` (``rm -rf build`` when it names none) with
  ``developer__shell``, as goose does in approve mode: the run waits for an approval, which
  every open page of the conversation shows, and goes on once someone decides (or it expires).
  A scripted turn cannot tell an allow from a deny, so its last words are the same after both:
  the tool's result before them says which it was (goose's refusal after a deny). Nothing is run.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from ..testing import TEXT_ONLY_MODEL_ERROR, FakeGoose, Turn
from ..testing.messages import message_text, new_message_id
from ..testing.sessions import DEFAULT_WORKING_DIR, SESSION_NAME, SessionRecord, new_session_id
from ..types import JSONObject
from ..upstream.goose import GooseUpstream

# Never resolved: the injected client hands every request to the fake in this process.
GOOSE_URL = "http://simulated-goose.invalid"
SECRET_KEY = "gateway-kit-demo-goose"
TYPING_DELAY = 0.3  # seconds between chunks, so that a person watching sees a model typing
TOOL_NAME = "count_words"
FAIL_COMMAND = "/fail"
FAILURE = "the simulated goose was asked to fail"
PUBLISH_COMMAND = "/publish"  # claims a page it has not written; writes it when asked
PRETEND_COMMAND = "/pretend"  # claims a page and never writes it
IMAGE_COMMAND = "/image"  # reads an image, which the text-only model refuses
APPROVE_COMMAND = "/approve"  # a shell command that waits for a person's approval
SHELL_TOOL = "developer__shell"
DEFAULT_COMMAND = "rm -rf build"
ASKING = ("This needs a shell command, ", "so I ask for your approval first: ", "`{command}`")
APPROVAL_PROMPT = "Allow this shell command? Nothing really runs: this goose is simulated."
RAN = "ran `{command}` (simulated: nothing was run)"
ANSWERED = ("Thanks for answering. ", "The tool's result above says ", "what came of `{command}`.")
PAGE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A page a follow-up prompt says is missing: a line ``- public/NAME.html``.
MISSING_PAGE = re.compile(r"^- (?P<path>\S*?(?P<name>[A-Za-z0-9_-]{1,64})\.html)$", re.MULTILINE)
CLAIM = "页面已生成 — the page is published at public/{name}.html"
STILL_CLAIMED = "Done: the page is published at public/{name}.html"
WRITTEN = "Sorry, I had not written it. Now public/{name}.html is saved."
LOOKING = ("Let me look at ", "the screenshot first.")
PAGE = (
    '<!doctype html><html><head><meta charset="utf-8"><title>{name}</title></head>'
    "<body><h1>{name}</h1><p>Published by the simulated goose, after a follow-up turn.</p>"
    "</body></html>"
)
EMPTY = "(an empty message)"
THINKING = ("Let me ", "count the words ", "of your message.")
ANSWER = (
    "You said: “{text}”. ",
    "That is {words} word{s}. ",
    "This reply comes from a simulated goose, ",
    "through the gateway's session pump, ",
    "into the event log.",
)


def pause(turn: Turn, delay: float) -> Turn:
    return turn.delay(delay) if delay else turn


def typed(turn: Turn, chunks: Iterable[str], delay: float) -> Turn:
    """`turn`, then one assistant message streamed in `chunks`, `delay` seconds apart."""
    message_id = new_message_id()
    for chunk in chunks:
        turn = pause(turn, delay).text(chunk, message_id=message_id)
    return turn


def page_name(text: str) -> str:
    """The page a ``/publish`` or ``/pretend`` message names (``page`` when it names none)."""
    words = text.split()
    found = PAGE_NAME.fullmatch(words[1]) if len(words) > 1 else None
    return found.group() if found else "page"


def claiming_turn(name: str, delay: float) -> Turn:
    return typed(Turn(), (CLAIM.format(name=name),), delay).usage(input_tokens=3, output_tokens=9)


def follow_up_turn(prompt: str, pretended: set[str], delay: float) -> Turn | None:
    """The answer to a finish guard's follow-up naming missing pages: the page written with
    ``write_file``, or, for a page only pretended, the same claim again. None for any other
    prompt."""
    missing = list(MISSING_PAGE.finditer(prompt))
    if not missing:
        return None
    turn = Turn()
    for found in missing:
        name = found["name"]
        if name in pretended:
            turn = typed(turn, (STILL_CLAIMED.format(name=name),), delay)
            continue
        page = PAGE.format(name=name)
        turn = pause(turn, delay).tool_call(
            "write_file", {"path": found["path"], "content": page}, result="written"
        )
        turn = typed(turn, (WRITTEN.format(name=name),), delay)
    return turn


def image_turn(delay: float) -> Turn:
    turn = typed(Turn(), LOOKING, delay)
    return pause(turn, delay).read_image().error(TEXT_ONLY_MODEL_ERROR)


def approve_turn(text: str, delay: float) -> Turn:
    """Ask to run the command of an ``/approve`` message, wait for the answer, then say so."""
    command = text.removeprefix(APPROVE_COMMAND).strip() or DEFAULT_COMMAND
    turn = typed(Turn(), [chunk.format(command=command) for chunk in ASKING], delay)
    turn = pause(turn, delay).confirm_tool(
        SHELL_TOOL,
        {"command": command},
        result=RAN.format(command=command),
        prompt=APPROVAL_PROMPT,
    )
    answered = [chunk.format(command=command) for chunk in ANSWERED]
    turn = typed(turn, answered, delay)
    return turn.usage(
        input_tokens=len(text.split()), output_tokens=sum(len(c.split()) for c in answered)
    )


def demo_turn(
    user_message: JSONObject,
    *,
    typing_delay: float = TYPING_DELAY,
    pretended: set[str] | None = None,
) -> Turn:
    """What the simulated goose does for one reply (its `default_turn`); `pretended` holds the
    pages ``/pretend`` claimed, which follow-ups never write."""
    text = message_text(user_message).strip() or EMPTY
    pretended = set() if pretended is None else pretended
    if text.startswith((PUBLISH_COMMAND, PRETEND_COMMAND)):
        name = page_name(text)
        if text.startswith(PRETEND_COMMAND):
            pretended.add(name)
        else:
            pretended.discard(name)
        return claiming_turn(name, typing_delay)
    if text.startswith(IMAGE_COMMAND):
        return image_turn(typing_delay)
    if text.startswith(APPROVE_COMMAND):
        return approve_turn(text, typing_delay)
    following = follow_up_turn(text, pretended, typing_delay)
    if following is not None:
        return following
    words = len(text.split())
    s = "" if words == 1 else "s"
    turn = typed(Turn(), THINKING, typing_delay)
    turn = pause(turn, typing_delay).tool_call(TOOL_NAME, {"text": text}, result=f"{words} word{s}")
    if text.startswith(FAIL_COMMAND):
        return pause(turn, typing_delay).error(FAILURE)
    answer = [chunk.format(text=text, words=words, s=s) for chunk in ANSWER]
    turn = typed(turn, answer, typing_delay)
    return turn.usage(input_tokens=words, output_tokens=sum(len(c.split()) for c in answer))


class SimulatedGoose(FakeGoose):
    """A `FakeGoose` for the demo that keeps the sessions it is given, as goosed keeps its
    sessions on disk across restarts, and never hands out one of their ids again."""

    def __init__(
        self, session_ids: Iterable[str] = (), *, typing_delay: float = TYPING_DELAY
    ) -> None:
        self.pretended: set[str] = set()  # the pages /pretend claimed: never written
        super().__init__(
            secret_key=SECRET_KEY,
            default_turn=functools.partial(
                demo_turn, typing_delay=typing_delay, pretended=self.pretended
            ),
        )
        # The log's streams stay bound to the sessions of an earlier run of the demo: without
        # them every later run of those conversations would fail with "session not found".
        for session_id in session_ids:
            self.sessions[session_id] = SessionRecord(session_id)
        self.upstream = GooseUpstream(
            GOOSE_URL, secret_key=self.secret_key, client=self.client(GOOSE_URL)
        )

    def create_session(
        self,
        *,
        working_dir: str = DEFAULT_WORKING_DIR,
        name: str = SESSION_NAME,
        extensions: Sequence[JSONObject] | None = None,
    ) -> str:
        # The fake numbers sessions from 1 in every process, so a demo started again today
        # would hand out ids that streams of the log are already bound to.
        session_id = new_session_id()
        while session_id in self.sessions:
            session_id = new_session_id()
        session = SessionRecord(session_id, working_dir=working_dir, name=name)
        session.extensions = [
            dict(e) for e in (self.extensions if extensions is None else extensions)
        ]
        self.sessions[session_id] = session
        return session_id

    async def aclose(self) -> None:
        """End the running turns and open event streams, as goosed stopping does; call it on
        the loop that serves the gateway, after the gateway has stopped its pumps."""
        self.restart()
        await self.upstream.client.aclose()
