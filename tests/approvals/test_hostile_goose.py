"""What goose sends is not trusted: odd `actionRequired` items never break the pump, and
arguments the log cannot hold in one event still make an approval that can be decided."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit.approvals.goose_actions import ActionRequest, action_requests, tool_response_ids
from gateway_kit.testing import FakeGoose, Turn
from tests.support.approvals import (
    confirmations,
    decide,
    in_loop,
    listed,
    pending_approval,
    start_asking_run,
)
from tests.support.runs import gateway_client, wait_status

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=10,
)
ITEM_KEYS = ["type", "data", "id", "actionType", "toolName", "arguments", "prompt", "message"]
ITEMS = st.dictionaries(
    st.sampled_from(ITEM_KEYS), st.one_of(JSON, st.sampled_from(["actionRequired"]))
)
DATA = st.dictionaries(
    st.sampled_from(["actionType", "id", "toolName", "arguments", "prompt", "message"]),
    st.one_of(JSON, st.sampled_from(["toolConfirmation", "elicitation", "x"])),
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        JSON,
        st.builds(
            lambda items: {"type": "Message", "message": {"content": items}},
            st.one_of(
                JSON,
                st.lists(
                    st.one_of(
                        ITEMS,
                        st.builds(lambda data: {"type": "actionRequired", "data": data}, DATA),
                    ),
                    max_size=4,
                ),
            ),
        ),
    )
)
def test_any_event_gives_well_formed_requests_or_none(event: Any) -> None:
    for asked in action_requests(event):
        assert isinstance(asked.request_id, str) and asked.request_id
        assert isinstance(asked.arguments, dict)
        assert asked.kind in ("tool_confirmation", "elicitation")
        assert asked.tool_name is None or isinstance(asked.tool_name, str)
        json.dumps(asked.arguments)  # what goose sent was JSON: it stays JSON
    assert all(isinstance(i, str) for i in tool_response_ids(event))


@in_loop
async def test_arguments_too_large_for_one_event_still_make_an_approval(log_url: str) -> None:
    fake = FakeGoose()
    content = "x" * (1024 * 1024 + 10)  # above the log's default limit for one event
    asking = Turn().confirm_tool("write_file", {"path": "big.txt", "content": content})
    async with gateway_client(log_url, fake) as (client, gateway, log):
        run_id, _ = await start_asking_run(client, fake, gateway, asking.text("written"))
        approval = await pending_approval(client)
        assert approval["arguments"]["content"] == content  # the approval keeps them whole
        requested = [
            e for e in log.read(stream="conv", limit=1000, settled=False)
            if e.type == "approval_requested"
        ]  # fmt: skip
        assert requested[0].data["arguments"] is None
        assert "left out of this event" in requested[0].data["arguments_omitted"]
        assert (await decide(client, approval)).status_code == 200
        await wait_status(client, run_id, "finished")
        assert len(confirmations(fake)) == 1


@in_loop
async def test_an_odd_action_item_is_written_and_the_run_goes_on(log_url: str) -> None:
    fake = FakeGoose()
    odd = {
        "role": "assistant",
        "content": [
            {"type": "actionRequired", "data": {"actionType": "toolConfirmation", "id": 7}},
            {"type": "actionRequired", "data": "nonsense"},
            {"type": "actionRequired"},
        ],
        "metadata": {"userVisible": True, "agentVisible": True},
    }
    async with gateway_client(log_url, fake) as (client, gateway, log):
        run_id, _ = await start_asking_run(
            client, fake, gateway, Turn().message(odd).text("went on")
        )
        await wait_status(client, run_id, "finished")
        assert await listed(client) == []
        written = [
            e.data["message"]["content"]
            for e in log.read(run_id=run_id, settled=False)
            if e.type == "Message"
        ]
        assert odd["content"] in written  # kept in the log as goose sent it


@in_loop
async def test_arguments_with_a_lone_surrogate_are_kept_and_shown(log_url: str) -> None:
    fake = FakeGoose()
    async with gateway_client(log_url, fake) as (client, gateway, _):
        assert gateway.approvals is not None
        asked = ActionRequest("tool_confirmation", "call_odd", "shell", {"path": "a\ud800b"}, None)
        approval, _ = await gateway.approvals.request(
            asked, stream="conv", run_id=None, session_id="s", lifetime=0
        )
        shown = await listed(client)
        assert shown[0]["arguments"] == {"path": "a\ud800b"}  # escaped on the wire, kept whole
        assert shown[0]["args_hash"] == approval.args_hash
        answer = await decide(client, shown[0])
        assert answer.status_code == 200, answer.text
        assert answer.json()["approval"]["arguments"] == {"path": "a\ud800b"}
