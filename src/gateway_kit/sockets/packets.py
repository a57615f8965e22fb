"""Socket.IO packets whose JSON integers may have any number of digits.

python-socketio decodes a packet's JSON with engine.io's ``json``, which refuses an integer of
more than 100 digits with an error: the packet is dropped, and a client that sent a subscribe
with such a cursor waits for its answer for ever. Here such an integer is read as the nearest
value beyond a 64-bit one (no value of this surface needs more, and Python cannot convert more
than a few thousand digits), so the handler answers it as it answers any cursor beyond every
seq: a reset, or a refusal when it is negative. The gateway's own server only: the class is
handed to python-socketio as its ``serializer``, no global of python-socketio is changed.
"""

from __future__ import annotations

import json
from typing import Any

from socketio import packet

from ..log.event import MAX_SEQ, MAX_SEQ_DIGITS

BEYOND = MAX_SEQ + 1


def bounded_int(text: str) -> int:
    digits = text.lstrip("-").lstrip("0")
    if len(digits) > MAX_SEQ_DIGITS:
        return -BEYOND if text.startswith("-") else BEYOND
    return int(text)


class BoundedJson:
    """The ``json`` a packet class uses: the standard one, reading integers with a bound."""

    dumps = staticmethod(json.dumps)

    @staticmethod
    def loads(text: str | bytes, **options: Any) -> Any:
        return json.loads(text, parse_int=bounded_int, **options)


class GatewayPacket(packet.Packet):  # type: ignore[misc]
    json = BoundedJson
