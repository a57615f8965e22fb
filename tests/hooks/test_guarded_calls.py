"""Each hook, called through a gateway's plugin manager: answers, failures and their logs.

A plugin that raises, or answers what its hook cannot use, is logged with its name and the
hook's, and never stops the other plugins: for the hooks that decide (firstresult) the next
plugin answers, for the hooks that collect every answer the others' answers are kept. The
hooks the gateway itself calls in this version (identity, authorization) are also shown over
HTTP in `tests/hooks/test_access.py`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from gateway_kit import (
    ANONYMOUS,
    EventLog,
    Gateway,
    GuardFailure,
    GuardVeto,
    PluginError,
    RecoveryPlan,
)
from gateway_kit.exceptions import DatabaseUnavailable
from gateway_kit.hooks import REFUSED
from tests.support.plugins import plugin, raising

TRYFIRST = {"tryfirst": True}


def gateway(log: EventLog, *plugins: object, **options: Any) -> Gateway:
    return Gateway(
        log=log, plugins=plugins, load_entry_points=False, **{"allow_anonymous": True, **options}
    )


def logged(caplog: pytest.LogCaptureFixture, plugin_name: str, hook: str) -> bool:
    return any(
        plugin_name in r.getMessage() and hook in r.getMessage() and r.levelno >= logging.ERROR
        for r in caplog.records
    )


# --- finish guards ---------------------------------------------------------------------------


def test_finish_guard_every_guard_is_asked_and_a_raising_one_is_logged_as_failed(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    def veto(run: object, events: list[object]) -> GuardVeto:
        return GuardVeto("no page was written", missing=["index.html"])

    def passes(run: object, events: list[object]) -> None:
        return None

    gw = gateway(
        log,
        plugin("page-guard", finish_guard=veto),
        plugin("broken-guard", finish_guard=raising),
        plugin("lenient-guard", finish_guard=passes),
    )
    answers = gw.plugins.hook.finish_guard(run={"run_id": "r1"}, events=[])
    # A guard that raised checked nothing: it never passes the run.
    failed = GuardFailure.of("broken-guard", "raised RuntimeError")
    assert sorted(answers, key=repr) == [failed, GuardVeto("no page was written", ("index.html",))]
    assert logged(caplog, "broken-guard", "finish_guard")


def test_finish_guard_answering_something_else_than_a_veto_is_logged_as_failed(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    def nonsense(run: object, events: list[object]) -> str:
        return "looks fine to me"

    gw = gateway(log, plugin("chatty-guard", finish_guard=nonsense))
    [failed] = gw.plugins.hook.finish_guard(run={}, events=[])
    assert isinstance(failed, GuardFailure) and failed.plugin == "chatty-guard"
    assert "'looks fine to me'" in failed.reason
    assert logged(caplog, "chatty-guard", "finish_guard")


def test_a_veto_needs_a_reason_and_a_list_of_missing_items() -> None:
    assert GuardVeto("x", missing=("a", "b")).missing == ("a", "b")
    with pytest.raises(ValueError, match="reason"):
        GuardVeto(" ")
    with pytest.raises(ValueError, match="list"):
        GuardVeto("x", missing="index.html")


# --- billing ---------------------------------------------------------------------------------


def test_bill_run_a_raising_ledger_does_not_stop_the_others(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    billed: list[tuple[object, str]] = []

    def ledger(run: object, usage: object, idempotency_key: str) -> None:
        billed.append((usage, idempotency_key))

    gw = gateway(
        log,
        plugin("ledger", bill_run=ledger),
        plugin("broken-ledger", bill_run=(raising, TRYFIRST)),
    )
    gw.plugins.hook.bill_run(run={}, usage={"input_tokens": 3}, idempotency_key="run:r1")
    assert billed == [({"input_tokens": 3}, "run:r1")]
    assert logged(caplog, "broken-ledger", "bill_run")


# --- error classification and recovery -------------------------------------------------------


def test_classify_error_the_next_plugin_answers_after_a_failure(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    def visual(error: str, run: object) -> str | None:
        return "SESSION_VISUAL_CONTEXT_UNSUPPORTED" if "image_url" in error else None

    def number(error: str, run: object) -> int:
        return 42

    gw = gateway(
        log,
        plugin("visual", classify_error=visual),
        plugin("broken", classify_error=(raising, TRYFIRST)),
        plugin("numbers", classify_error=number),
    )
    answer = gw.plugins.hook.classify_error(error="image_url is not supported", run={})
    assert answer == "SESSION_VISUAL_CONTEXT_UNSUPPORTED"
    assert logged(caplog, "broken", "classify_error")
    assert logged(caplog, "numbers", "classify_error")  # 42 is no class name


def test_plan_recovery_the_next_plugin_plans_after_a_failure(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    plan = RecoveryPlan("clean_session", clean_session=True)

    def planner(error_class: str, run: object, attempts: list[object]) -> object:
        if error_class == "TOOL_HISTORY":
            return plan
        return {"kind": "clean_session"} if error_class == "DICT" else None

    gw = gateway(
        log,
        plugin("planner", plan_recovery=planner),
        plugin("broken-planner", plan_recovery=(raising, TRYFIRST)),
    )
    assert gw.plugins.hook.plan_recovery(error_class="TOOL_HISTORY", run={}, attempts=[]) is plan
    assert gw.plugins.hook.plan_recovery(error_class="OTHER", run={}, attempts=[]) is None
    assert logged(caplog, "broken-planner", "plan_recovery")
    # A plan is a RecoveryPlan: anything else is logged and counts as no plan.
    assert gw.plugins.hook.plan_recovery(error_class="DICT", run={}, attempts=[]) is None
    assert logged(caplog, "planner", "plan_recovery")


# --- heartbeat -------------------------------------------------------------------------------


def test_resolve_tmux_session_the_next_plugin_answers_after_a_failure(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    def from_header(scope: dict[str, Any]) -> str | None:
        return dict(scope["headers"]).get(b"x-tmux-session", b"").decode() or None

    gw = gateway(
        log,
        plugin("by-header", resolve_tmux_session=from_header),
        plugin("broken", resolve_tmux_session=(raising, TRYFIRST)),
    )
    scope = {"headers": [(b"x-tmux-session", b"work-1")]}
    assert gw.plugins.hook.resolve_tmux_session(scope=scope) == "work-1"
    assert logged(caplog, "broken", "resolve_tmux_session")


def test_heartbeat_policy_a_nonsense_decision_is_logged_and_the_next_decides(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    def skip(state: object, now: float) -> str:
        return "skip"

    def maybe(state: object, now: float) -> str:
        return "maybe"

    gw = gateway(
        log, plugin("quiet-hours", heartbeat_policy=skip), plugin("unsure", heartbeat_policy=maybe)
    )
    assert gw.plugins.hook.heartbeat_policy(state="IDLE", now=0.0) == "skip"
    assert logged(caplog, "unsure", "heartbeat_policy")


def test_heartbeat_fallback_a_failing_pane_reader_is_a_skip(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    def pane(tmux_session_id: str) -> str:
        return "allow"

    gw = gateway(
        log,
        plugin("pane-heuristic", heartbeat_fallback=pane),
        plugin("broken", heartbeat_fallback=(raising, TRYFIRST)),
    )
    # It cannot vouch for the pane: nobody else's "allow" is taken instead.
    assert gw.plugins.hook.heartbeat_fallback(tmux_session_id="work-1") == "skip"
    assert logged(caplog, "broken", "heartbeat_fallback")


# --- identity and authorization (through the manager; over HTTP in test_access.py) ------------


def test_resolve_principal_a_raising_resolver_refuses_and_is_logged(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    gw = gateway(log, plugin("broken-sso", resolve_principal=raising))
    assert asyncio.run(gw.plugins.resolve_principal({"type": "http", "headers": []})) is REFUSED
    assert logged(caplog, "broken-sso", "resolve_principal")


def test_authorize_subscription_a_raising_plugin_refuses_and_is_logged(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    gw = gateway(log, plugin("broken-acl", authorize_subscription=raising))
    assert asyncio.run(gw.plugins.authorize_subscription(ANONYMOUS, "conv")) is False
    assert logged(caplog, "broken-acl", "authorize_subscription")


def unreachable(*args: Any) -> Any:
    raise DatabaseUnavailable("the database cannot be reached: connection refused")


def test_an_access_hook_that_cannot_reach_the_database_gives_no_verdict(log: EventLog) -> None:
    """Neither a refusal (401, 403) nor a pass: the caller answers 503, try again."""
    gw = gateway(
        log,
        plugin("sso", resolve_principal=unreachable),
        plugin("acl", authorize_subscription=unreachable),
    )
    with pytest.raises(DatabaseUnavailable):
        asyncio.run(gw.plugins.resolve_principal({"type": "http", "headers": []}))
    with pytest.raises(DatabaseUnavailable):
        asyncio.run(gw.plugins.authorize_subscription(ANONYMOUS, "conv"))


# --- plugin settings -------------------------------------------------------------------------


def test_configure_plugin_each_plugin_gets_its_own_settings(log: EventLog) -> None:
    received: dict[str, object] = {}

    def remember_a(config: dict[str, object]) -> None:
        received["a"] = config

    def remember_b(config: dict[str, object]) -> None:
        received["b"] = config

    gateway(
        log,
        plugin("a", configure_plugin=remember_a),
        plugin("b", configure_plugin=remember_b),
        plugin_config={"a": {"root": "/srv/pages"}},
    )
    assert received == {"a": {"root": "/srv/pages"}, "b": {}}


def test_configure_plugin_refusing_its_settings_stops_the_start_up(log: EventLog) -> None:
    def picky(config: dict[str, object]) -> None:
        if not isinstance(config.get("root"), str):
            raise ValueError("root must be a path")

    with pytest.raises(PluginError, match=r"'pages'.*root must be a path"):
        gateway(log, plugin("pages", configure_plugin=picky), plugin_config={"pages": {"root": 1}})


def test_settings_for_a_plugin_that_is_not_loaded_are_an_error(log: EventLog) -> None:
    with pytest.raises(PluginError, match=r"'typo'.*loaded: .*pages"):
        gateway(log, plugin("pages"), plugin_config={"typo": {}})
    with pytest.raises(PluginError, match="must be a mapping"):
        gateway(log, plugin("pages"), plugin_config={"pages": ["not", "a", "mapping"]})
