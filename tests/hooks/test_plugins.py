"""The plugin manager of a gateway: where plugins come from, what is refused at registration."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest

import gateway_kit
from gateway_kit import EventLog, Gateway, PluginError, Plugins, hookimpl
from gateway_kit.hooks import BUILT_IN, PASSED_IN
from tests.support.plugins import plugin


def names(plugins: Plugins) -> list[str]:
    return [info.name for info in plugins.describe()]


def test_hookimpl_and_guard_veto_come_from_the_package() -> None:
    from gateway_kit import GuardVeto
    from gateway_kit import hookimpl as marker

    assert marker is gateway_kit.hookimpl and marker.project_name == "gateway_kit"
    assert GuardVeto("missing page").reason == "missing page"


def test_the_built_ins_are_registered_by_this_distributions_entry_points() -> None:
    plugins = Plugins(load_entry_points=False)
    [builtin] = [i for i in plugins.describe() if i.name == "default_authorization"]
    assert builtin.source.kind == BUILT_IN
    assert builtin.source.distribution == "gateway-kit"
    assert builtin.source.version == gateway_kit_version()
    assert builtin.hooks == ("authorize_subscription", "configure_plugin")
    impl = plugins.hook.authorize_subscription.get_hookimpls()[0]
    assert impl.trylast  # a deployment's plugins are asked before it
    resolvers = {impl.plugin_name: impl for impl in plugins.hook.resolve_principal.get_hookimpls()}
    assert set(resolvers) == set(BUILT_IN_RESOLVERS)
    assert all(impl.trylast for impl in resolvers.values())


BUILT_IN_RESOLVERS = ("bearer_identity", "flask_session_identity", "host_identity")
BUILT_IN_POLICIES = (
    "default_authorization",
    "publish_guard",
    "tmux_pane",
    "tmux_session_resolver",
    "tool_history_recovery",
    "transient_retry",
    "usage_ledger",
    "visual_fallback",
)


def gateway_kit_version() -> str:
    from importlib.metadata import version

    return version("gateway-kit")


def test_every_gateway_has_a_plugin_manager_of_its_own(log: EventLog) -> None:
    first = Gateway(log=log, plugins=[plugin("only-here")], allow_anonymous=True)
    second = Gateway(log=log, allow_anonymous=True)
    assert first.plugins.manager is not second.plugins.manager
    assert "only-here" in names(first.plugins) and "only-here" not in names(second.plugins)


def test_passed_in_plugins_are_named_by_their_module_or_their_class(log: EventLog) -> None:
    module = ModuleType("acme_guards")

    @hookimpl
    def authorize_subscription(principal: Any, stream: str) -> None:
        return None

    module.authorize_subscription = authorize_subscription  # type: ignore[attr-defined]

    class TeamPolicy:
        @hookimpl
        def classify_error(self, error: str) -> None:
            return None

    gateway = Gateway(
        log=log, plugins=[module, TeamPolicy()], load_entry_points=False, allow_anonymous=True
    )
    described = {i.name: i for i in gateway.plugins.describe()}
    assert described["acme_guards"].source.kind == PASSED_IN
    assert described["acme_guards"].hooks == ("authorize_subscription",)
    [qualified] = [name for name in described if name.endswith("<locals>.TeamPolicy")]
    assert qualified.startswith(__name__)
    assert described[qualified].hooks == ("classify_error",)
    with pytest.raises(PluginError, match="distinct __name__"):
        Gateway(log=log, plugins=[TeamPolicy(), TeamPolicy()], allow_anonymous=True)


def test_any_plugin_can_be_blocked_by_name(log: EventLog) -> None:
    gateway = Gateway(
        allow_anonymous=True,
        log=log,
        plugins=[plugin("kept"), plugin("unwanted")],
        block_plugins=["unwanted", *BUILT_IN_RESOLVERS, *BUILT_IN_POLICIES],
        load_entry_points=False,
    )
    assert names(gateway.plugins) == ["kept"]


def test_async_hook_implementations_are_refused(log: EventLog) -> None:
    async def authorize_subscription(principal: Any, stream: str) -> bool:
        return True

    with pytest.raises(PluginError, match=r"'async-acl'.*synchronous"):
        Gateway(
            allow_anonymous=True,
            log=log,
            plugins=[plugin("async-acl", authorize_subscription=authorize_subscription)],
        )


def test_hook_wrappers_are_refused(log: EventLog) -> None:
    def classify_error(error: str) -> Any:
        return (yield)

    wrapper = plugin("wrapping", classify_error=(classify_error, {"wrapper": True}))
    with pytest.raises(PluginError, match=r"'wrapping'.*wrapper"):
        Gateway(log=log, plugins=[wrapper], allow_anonymous=True)


def test_a_misspelt_hook_is_an_error_at_start_up(log: EventLog) -> None:
    def finish_gaurd(run: Any, events: Any) -> None:
        return None

    with pytest.raises(PluginError, match=r"'typo'.*finish_gaurd"):
        Gateway(log=log, plugins=[plugin("typo", finish_gaurd=finish_gaurd)], allow_anonymous=True)


def test_an_argument_the_hook_does_not_have_is_an_error_at_registration(log: EventLog) -> None:
    def authorize_subscription(principal: Any, stream: str, user: Any) -> bool:
        return True

    with pytest.raises(Exception, match="user"):
        Gateway(
            allow_anonymous=True,
            log=log,
            plugins=[plugin("extra-arg", authorize_subscription=authorize_subscription)],
        )


def test_an_entry_point_that_cannot_be_imported_names_its_plugin(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import metadata

    from gateway_kit.hooks import loading

    real = metadata.entry_points

    def with_a_broken_one(**selection: Any) -> Any:
        found = list(real(**selection))
        broken = metadata.EntryPoint(
            "broken_plugin", "no_such_module_anywhere", loading.ENTRY_POINT_GROUP
        )
        return [*found, broken]

    monkeypatch.setattr(loading.metadata, "entry_points", with_a_broken_one)
    with pytest.raises(PluginError, match="cannot load plugin 'broken_plugin'"):
        Gateway(log=log, allow_anonymous=True)
    Gateway(
        log=log, load_entry_points=False, allow_anonymous=True
    )  # only the built-ins: it is not even imported
    Gateway(log=log, block_plugins=["broken_plugin"], allow_anonymous=True)


def test_without_the_built_ins_installed_the_error_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gateway_kit.hooks import loading

    monkeypatch.setattr(loading.metadata, "entry_points", lambda **selection: [])
    with pytest.raises(PluginError, match="pip install"):
        Plugins()


def test_the_plugins_folder_is_what_the_entry_points_name() -> None:
    from gateway_kit_plugins.default_authorization import DefaultAuthorization

    assert "gateway_kit_plugins" in sys.modules
    unconfigured = DefaultAuthorization()
    assert unconfigured.authorize_subscription(gateway_kit.ANONYMOUS, "any", "read") is True
    alice = gateway_kit.Principal(user_id="alice", method="bearer")
    assert unconfigured.authorize_subscription(alice, "any", "read") is False  # no owners known
