"""What the built-in recovery plugins classify and plan, and the pieces they build on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from gateway_kit_plugins import tool_history_recovery
from gateway_kit_plugins.tool_history_recovery import TOOL_HISTORY_CLASS, ToolHistoryRecovery
from gateway_kit_plugins.transient_retry import TRANSIENT_CLASS, TransientRetry
from gateway_kit_plugins.visual_fallback import VISUAL_CLASS, VisualFallback
from hypothesis import given
from hypothesis import strategies as st

from gateway_kit.exceptions import UpstreamHTTPError, UpstreamTimeout, UpstreamUnavailable
from gateway_kit.hooks import PluginContext
from gateway_kit.runs.tool_overrides import without_tools
from gateway_kit.runs.upstream_calls import NO_ANSWER
from gateway_kit.testing import FakeGoose, goose_validator
from gateway_kit.testing.extensions import DEFAULT_EXTENSIONS, session_tools
from gateway_kit.upstream.goose.errors import error_from_response
from gateway_kit.upstream.goose.events import UNREACHABLE_MESSAGE
from gateway_kit.upstream.goose.pump import UNREACHABLE_ERROR
from gateway_kit.upstream.goose.pumps import PUMP_FAILED_ERROR

RUN = SimpleNamespace(run_id="r1", stream="conv", message="fix the page")
VIEWER = ["read_image", "zoom"]
QUOTES = ["", "`", "'", '"', '\\"', "\\u0060"]


def configured(plugin: Any, **config: Any) -> Any:
    plugin.configure_plugin(config, PluginContext())
    return plugin


@given(
    quote=st.sampled_from(QUOTES),
    before=st.text(max_size=40),
    after=st.text(max_size=40),
    spaces=st.sampled_from([" ", "  ", "\n"]),
)
def test_the_image_url_phrase_is_visual_in_every_wrapping(
    quote: str, before: str, after: str, spaces: str
) -> None:
    phrase = f"unknown variant {quote}image_url{quote},{spaces}expected {quote}text{quote}"
    text = f"{before}{phrase}{after}"
    assert VisualFallback().classify_error(text) == VISUAL_CLASS
    assert TransientRetry().classify_error(f"goose answered 500: {text}", RUN) is None


@pytest.mark.parametrize(
    "text",
    [
        "unknown variant image_url, expected text",
        "unknown variant `image_url`, expected `text`",
        json.dumps({"error": {"message": "unknown variant `image_url`, expected `text`"}}),
        json.dumps(json.dumps('unknown variant "image_url", expected "text" at line 1')),
        "Request failed: Bad request (400): Failed to deserialize the JSON body into the target "
        "type: messages[3]: unknown variant `image_url`, expected `text` at line 1 column 2011",
    ],
)
def test_the_forms_providers_send_are_visual(text: str) -> None:
    assert VisualFallback().classify_error(text) == VISUAL_CLASS
    assert ToolHistoryRecovery().classify_error(text) is None


def test_other_mentions_of_images_are_not_visual() -> None:
    for text in ("image_url is not supported", "unknown variant `file`, expected `text`"):
        assert VisualFallback().classify_error(text) is None
    assert (
        configured(VisualFallback(), enabled=False).classify_error(
            "unknown variant image_url, expected text"
        )
        is None
    )


@pytest.mark.parametrize(
    "text",
    [
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: c1",
        json.dumps(
            {
                "error": {
                    "message": "An assistant message with 'tool_calls' must be followed by "
                    "tool messages responding to each 'tool_call_id'."
                }
            }
        ),
        "messages.4: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_01",
        json.dumps("`tool_use` ids were found without `tool_result` blocks immediately after"),
    ],
)
def test_polluted_tool_histories_are_classified(text: str) -> None:
    assert ToolHistoryRecovery().classify_error(text) == TOOL_HISTORY_CLASS
    assert VisualFallback().classify_error(text) is None


def test_configured_patterns_name_the_tool_history_class_too() -> None:
    plugin = configured(ToolHistoryRecovery(), error_patterns=[r"tool result missing for \w+"])
    assert plugin.classify_error("oops: Tool result missing for call_1") == TOOL_HISTORY_CLASS
    assert plugin.classify_error("something else") is None


@pytest.mark.parametrize(
    ("plugin", "config"),
    [
        (ToolHistoryRecovery, {"error_patterns": "one string"}),
        (ToolHistoryRecovery, {"error_patterns": ["(unclosed"]}),
        (ToolHistoryRecovery, {"enabled": "yes"}),
        (VisualFallback, {"image_tool": ""}),
        (VisualFallback, {"image_tol": "read_image"}),
        (TransientRetry, {"retries": 0}),
        (TransientRetry, {"base_delay": 5, "max_delay": 1}),
        (TransientRetry, {"max_delay": float("inf")}),
    ],
)
def test_settings_that_cannot_work_are_refused(plugin: Any, config: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        configured(plugin(), **config)


def goose_refusal(status: int, retry_after: str | None = None) -> str:
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    response = httpx.Response(status, json={"message": "overloaded"}, headers=headers)
    return str(error_from_response(response))


def test_the_gateways_own_failures_toward_goose_are_transient() -> None:
    """The texts the gateway itself writes when goosed fails it (a rewording breaks this)."""
    plugin = TransientRetry()
    unreachable = UNREACHABLE_MESSAGE.format(url="http://g/x", error=httpx.ConnectError("no"))
    for text in (
        str(UpstreamUnavailable(unreachable)),
        str(UpstreamTimeout(NO_ANSWER.format(call="the reply r", seconds=15))),
        f"the follow-up turn could not start: {goose_refusal(503)}",
        PUMP_FAILED_ERROR.format(count=5, error=UpstreamUnavailable(unreachable)),
        UNREACHABLE_ERROR.format(seconds=60),
    ):
        assert plugin.classify_error(text, RUN) == TRANSIENT_CLASS, text


def test_gooses_own_errors_are_never_retried_again() -> None:
    """goose retries the provider itself before it reports an `Error` event."""
    plugin = TransientRetry()
    for text in (
        "Server error: 503 Service Unavailable",
        "Rate limit exceeded: please retry after 20s",
        "Request failed: provider answered 502",
        goose_refusal(400),
        goose_refusal(401),
    ):
        assert plugin.classify_error(text, RUN) is None, text


def test_the_backoff_doubles_and_retry_after_is_honoured() -> None:
    plugin = configured(TransientRetry(), retries=3, base_delay=0.5, max_delay=10)
    tried = [SimpleNamespace(recovery="transient_retry")]
    assert plugin.classify_error(goose_refusal(503), RUN) == TRANSIENT_CLASS
    first = plugin.plan_recovery(TRANSIENT_CLASS, RUN, [])
    assert (first.kind, first.retries, first.delay) == ("transient_retry", 3, 0.5)
    assert plugin.plan_recovery(TRANSIENT_CLASS, RUN, tried * 2).delay == 2.0
    plugin.classify_error(goose_refusal(503, "4"), RUN)
    assert plugin.plan_recovery(TRANSIENT_CLASS, RUN, tried).delay == 4.0
    plugin.classify_error(goose_refusal(429 + 74, "60"), RUN)  # longer than max_delay
    assert plugin.plan_recovery(TRANSIENT_CLASS, RUN, []) is None
    assert plugin.plan_recovery(VISUAL_CLASS, RUN, []) is None


def test_retry_after_as_an_http_date_is_kept_with_the_error() -> None:
    error = error_from_response(
        httpx.Response(503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    )
    assert isinstance(error, UpstreamHTTPError) and error.retry_after == 0.0
    assert (
        error_from_response(httpx.Response(503, headers={"Retry-After": "soon"})).retry_after
        is None
    )


def test_plans_leave_out_the_configured_image_tool_and_keep_every_tool_for_tool_history() -> None:
    visual = configured(VisualFallback(), image_tool="developer__read_image")
    plan = visual.plan_recovery(VISUAL_CLASS, RUN)
    assert plan.clean_session and plan.drop_tools == ("developer__read_image",)
    assert "fix the page" in plan.instructions
    history = ToolHistoryRecovery().plan_recovery(TOOL_HISTORY_CLASS, RUN)
    assert history.clean_session and history.drop_tools == ()
    assert ToolHistoryRecovery().plan_recovery(VISUAL_CLASS, RUN) is None


def test_without_tools_narrows_only_the_extension_that_has_the_tool() -> None:
    extensions = [
        *DEFAULT_EXTENSIONS,
        {"type": "builtin", "name": "Screen Reader", "description": "images only"},
        {
            "type": "builtin",
            "name": "viewer",
            "description": "v",
            "available_tools": ["read_image", "zoom"],
        },
    ]
    catalogue = {
        "developer": ["shell", "read_image"],
        "screen_reader": ["read_image"],
        "memory": ["m"],
    }
    tools = [*session_tools(extensions, catalogue), {"name": "viewer__zoom"}]
    overrides = without_tools(extensions, tools, ["read_image"])
    names = [o["name"] for o in overrides]
    assert names == ["developer", "memory", "viewer"]  # an extension left with no tool goes
    assert overrides[0]["available_tools"] == ["shell"]
    assert "available_tools" not in overrides[1]
    assert overrides[2]["available_tools"] == ["zoom"]
    only_viewer = without_tools(extensions, tools, ["viewer__read_image"])
    assert "available_tools" not in only_viewer[0] and only_viewer[3]["available_tools"] == ["zoom"]
    assert without_tools(extensions, tools, []) == [dict(e) for e in extensions]


def test_the_fake_gooses_extensions_and_tools_have_gooses_shapes() -> None:
    fake = FakeGoose()
    session = fake.create_session()
    extensions = goose_validator("SessionExtensionsResponse")
    tool = goose_validator("ToolInfo")

    async def main() -> tuple[httpx.Response, httpx.Response]:
        async with fake.client() as client:
            listed = await client.get(f"/sessions/{session}/extensions")
            tools = await client.get("/agent/tools", params={"session_id": session})
            return listed, tools

    listed, tools = asyncio.run(main())
    assert listed.status_code == 200 and tools.status_code == 200
    extensions.validate(listed.json())
    for info in tools.json():
        tool.validate(info)
    assert "developer__read_image" in {t["name"] for t in tools.json()}


def test_the_plugins_doc_shows_tool_history_recoverys_real_code() -> None:
    source = Path(tool_history_recovery.__file__).read_text(encoding="utf-8")
    code = source[source.index("from __future__") :]
    doc = Path(__file__).parents[2] / "docs" / "plugin_hooks.md"
    assert f"```python\n{code}```" in doc.read_text(encoding="utf-8")
