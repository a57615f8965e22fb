"""A fake goose server (goosed 1.41.0) to test a gateway against, and what goes with it.

Example::

    fake = FakeGoose(ping_interval=0.05)
    session_id = fake.create_session()
    fake.script(session_id, Turn().text("Hel", "lo").usage(3, 2))
    with respx.mock() as router:
        fake.mock(router, base_url="http://goose.test")  # streams, unlike respx's ASGI handler
        ...  # point the gateway's GooseUpstream at http://goose.test

Or without respx: ``GooseUpstream(secret_key=fake.secret_key, client=fake.client())``, and the
gateway itself served in-process with its lifespan by ``async with asgi_client(gateway)``.

Approve mode: ``Turn().confirm_tool("developer__shell", {"command": "ls"}, result="a.txt")``
asks for the tool's confirmation and waits until ``POST /action-required/tool-confirmation``
answers it (recorded in ``fake.confirmation_calls``); ``Turn().elicit("Your name?")`` waits for
a reply whose message is ``elicitation_response(id, {"name": "Ada"})``. The ids a session waits
for are ``fake.pending_confirmations(session_id)``.
"""

from __future__ import annotations

from .asgi_client import asgi_client
from .bus import TOO_FAR_BEHIND_ERROR
from .confirmations import DECLINED_RESPONSE, ELICITATION_TIMEOUT_TEXT
from .fake_acp_agent import AcpScript, FakeAcpAgent, FakeAcpServer
from .fake_goose import DEFAULT_BASE_URL, FakeGoose
from .fake_state import DEFAULT_SECRET_KEY
from .messages import elicitation_response, user_message
from .records import CancelCall, ConfirmationCall, EventsCall, RecordedRequest, ReplyCall
from .schema import goose_openapi, goose_validator
from .transport import StreamingASGITransport
from .turns import TEXT_ONLY_MODEL_ERROR, Turn, echo_turn

__all__ = [
    "DECLINED_RESPONSE",
    "DEFAULT_BASE_URL",
    "DEFAULT_SECRET_KEY",
    "ELICITATION_TIMEOUT_TEXT",
    "TEXT_ONLY_MODEL_ERROR",
    "TOO_FAR_BEHIND_ERROR",
    "AcpScript",
    "CancelCall",
    "ConfirmationCall",
    "EventsCall",
    "FakeAcpAgent",
    "FakeAcpServer",
    "FakeGoose",
    "RecordedRequest",
    "ReplyCall",
    "StreamingASGITransport",
    "Turn",
    "asgi_client",
    "echo_turn",
    "elicitation_response",
    "goose_openapi",
    "goose_validator",
    "user_message",
]
