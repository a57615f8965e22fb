"""What the publish guard's tests share: the guard as a gateway loads it, pages, and goose
events to check."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gateway_kit_plugins.publish_guard import PublishGuard

from gateway_kit import Event, EventLog, PluginContext
from gateway_kit.testing import Turn

NAME = "publish_guard"
OWNER = "alice"


def template(tmp_path: Path) -> str:
    return f"{tmp_path}/ms/{{user_id}}/public"


def public_root(tmp_path: Path, user: str = OWNER) -> Path:
    root = tmp_path / "ms" / user / "public"
    root.mkdir(parents=True, exist_ok=True)
    return root


def page(*assets: str, title: str = "Foxes") -> str:
    images = "".join(f'<img src="{asset}" alt="">' for asset in assets)
    return (
        f"<!doctype html><html><head><title>{title}</title></head>"
        f"<body><h1>{title}</h1><p>All about {title.lower()}.</p>{images}</body></html>"
    )


def claiming(*texts: str) -> Turn:
    """A turn that ends by saying `texts` (streamed as one message, in chunks)."""
    return Turn().text(*texts).usage(input_tokens=10, output_tokens=5)


# --- goose events without a goose: for calling the guard directly -----------------------------

_ids = itertools.count(1)


def goose_text(text: str) -> dict[str, Any]:
    message = {
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "created": 0,
        "content": [{"type": "text", "text": text}],
        "metadata": {"userVisible": True, "agentVisible": True},
    }
    return {"type": "Message", "message": message, "token_state": {}}


def goose_message(role: str, *contents: dict[str, Any]) -> dict[str, Any]:
    message = {"id": f"msg_{next(_ids)}", "role": role, "created": 0, "content": list(contents)}
    return {"type": "Message", "message": message}


def goose_tool_call(
    name: str, arguments: dict[str, Any], *, result: str | None = None, call_id: str | None = None
) -> list[dict[str, Any]]:
    """goose's request of a tool call and its response (whose text is `result`)."""
    call_id = call_id or f"call_{next(_ids)}"
    request = {
        "type": "toolRequest",
        "id": call_id,
        "toolCall": {"status": "success", "value": {"name": name, "arguments": arguments}},
    }
    content = [] if result is None else [{"type": "text", "text": result}]
    response = {
        "type": "toolResponse",
        "id": call_id,
        "toolResult": {"status": "success", "value": {"content": content, "isError": False}},
    }
    return [goose_message("assistant", request), goose_message("user", response)]


def goose_confirmation(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """goose's question, in approve mode, whether the tool call `call_id` may run."""
    asked = {
        "type": "actionRequired",
        "data": {
            "actionType": "toolConfirmation",
            "id": call_id,
            "toolName": name,
            "arguments": arguments,
            "prompt": None,
        },
    }
    return goose_message("assistant", asked)


# An event of another type than goose's `Message`, as (type, data).
Typed = tuple[str, dict[str, Any]]


def run_events(
    log: EventLog, stream: str, *goose: dict[str, Any] | Typed
) -> tuple[Any, list[Event]]:
    """A run of `stream` whose goose turn sent `goose` (goose's `Message` data, or events of
    other types as (type, data)), then `Finish`: (run, its events)."""
    run_id = f"run-{next(_ids)}"
    for item in goose:
        event_type, data = item if isinstance(item, tuple) else ("Message", item)
        log.append(stream, event_type, data, run_id=run_id)
    log.append(stream, "UpstreamFinish", {"type": "Finish", "reason": "stop"}, run_id=run_id)
    # As the lifecycle hands them to the guards: every committed event, settled or not.
    return SimpleNamespace(run_id=run_id, stream=stream), log.read(run_id=run_id, settled=False)


def configured(log: EventLog, tmp_path: Path, **settings: Any) -> PublishGuard:
    """A guard configured as a gateway on `log` would configure it."""
    guard = PublishGuard()
    guard.configure_plugin({"public_root": template(tmp_path), **settings}, PluginContext(log=log))
    return guard


def options(tmp_path: Path, **settings: Any) -> dict[str, Any]:
    return {
        "plugin_config": {NAME: {"public_root": template(tmp_path), **settings}},
    }
