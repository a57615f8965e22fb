"""`Event`: the envelope JSON built around the stored data is the envelope, for any text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gateway_kit import Event

names = st.text(min_size=1).filter(lambda t: "\x00" not in t)
maybe_names = st.none() | names


@given(
    seq=st.integers(1, 2**63 - 1),
    stream=names,
    pos=st.integers(1, 2**31 - 1),
    run_id=maybe_names,
    type_=names,
    data=st.dictionaries(st.text(), st.text() | st.integers() | st.none()),
    upstream_event_id=maybe_names,
)
def test_envelope_json_is_the_envelope(
    seq: int,
    stream: str,
    pos: int,
    run_id: str | None,
    type_: str,
    data: dict[str, object],
    upstream_event_id: str | None,
) -> None:
    data_json = json.dumps(data, ensure_ascii=False)
    event = Event(seq, stream, pos, run_id, type_, data_json, upstream_event_id, 0.0)
    assert json.loads(event.envelope_json()) == event.envelope()
