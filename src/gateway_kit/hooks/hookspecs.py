"""The hooks a gateway_kit plugin may implement, grouped by family.

Hooks are synchronous: an ``async def`` implementation is refused at registration (under
``firstresult`` a coroutine would win without ever running). Work that must wait on I/O lives in
an object a hook returns. A hook implementation may take fewer arguments than its spec.

Above each spec, `answers` declares its policy (`gateway_kit.hooks.policy`): the answers it
accepts; what an implementation that raises, answers something else or (when ``timed``) takes
longer than the plugin timeout counts as having answered (``on_failure``, ``None`` unless
said); and the threads its calls run in (``pool``). A spec without one accepts anything and
fails as ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..bindings.names import is_tmux_session_id
from ..principal import Principal
from .markers import hookspec
from .policy import (
    AUTHORIZATION_POOL,
    BILLING_POOL,
    HEARTBEAT_POOL,
    IDENTITY_POOL,
    LIFECYCLE_POOL,
    RAISE,
    REFUSED,
    RETRY,
    FailedAs,
    answers,
    anything,
    one_of,
    optional,
)
from .results import GuardFailure, GuardVeto, RecoveryPlan

if TYPE_CHECKING:
    from ..log.event import Event
    from ..types import Scope
    from .context import PluginContext

# What `authorize_subscription` is asked about: its ``action``.
READ = "read"
CLAIM = "claim"

DECISION = one_of(None, "allow", "skip")
DECISION_EXPECTED = "None, 'allow' or 'skip'"


def identified(value: object) -> bool:
    # The anonymous principal is the gateway's own answer (only with allow_anonymous, which
    # lets it read everything): a resolver answering with it is refused, not believed.
    return value is None or (isinstance(value, Principal) and not value.anonymous)


def allowed_or_refused(value: object) -> bool:
    return value is None or isinstance(value, bool)


# A guard that failed did not check the run: it must not pass a claim it never looked at.
GUARD_FAILED = FailedAs(GuardFailure.of, "a `GuardFailure`")


# --- finish guards ---------------------------------------------------------------------------


@hookspec
@answers(optional(GuardVeto), "None or a GuardVeto", on_failure=GUARD_FAILED, pool=LIFECYCLE_POOL)
def finish_guard(run: Any, events: Sequence[Event]) -> GuardVeto | None:
    """Check that a run really did what its upstream ``Finish`` claims.

    Called after goose's ``Finish`` for a run's current request, in a worker thread (it may
    look at files); every guard is asked, and any veto wins: the run gets a follow-up turn in
    the same goose session naming the vetoes' reasons and missing items, then the guards are
    asked again. Past the lifecycle's ``max_follow_ups`` the run gets a ``guard_failed`` event
    and then its ``Finish``. A guard that raises, answers something else, or does not answer
    within the lifecycle's ``hook_timeout`` counts as a `GuardFailure` (a veto naming it): it
    checked nothing, so the run ends ``guard_failed`` at once, without a follow-up. The runs an
    app writes itself are asked alike when the app's turn ends (``owned_run(...,
    guards=gateway.run_guards, follow_up=...)``); their follow-up turn is the app's.

    :param run: the run (``run_id``, ``stream``, ``status``, ``attempt``, ...).
    :param events: the run's events so far, oldest first (goose's ``Finish`` is among them as
        ``UpstreamFinish``).
    :returns: ``None`` to pass, or a `GuardVeto` to ask for a follow-up turn.
    """


# --- billing ---------------------------------------------------------------------------------


@hookspec
@answers(anything, "anything", on_failure=RETRY, pool=BILLING_POOL)
def bill_run(run: Any, usage: Mapping[str, Any], idempotency_key: str) -> None:
    """Record what a run cost, once per run.

    Called once when a run ends, whatever is replayed or restarted: the bill is written with
    the run's terminal event and delivered after it. A delivery in which any implementation
    raises is made again later (by any gateway process) with the same key, so a consumer that
    honours the key bills exactly once.

    :param run: the run that ended.
    :param usage: the token usage upstream reported, summed over the run's attempts.
    :param idempotency_key: the same for every delivery of this run's bill.
    :returns: nothing; the result is ignored.
    """


# --- error classification and recovery -------------------------------------------------------


@hookspec(firstresult=True)
@answers(optional(str), "None or an error class name", pool=LIFECYCLE_POOL)
def classify_error(error: str, run: Any) -> str | None:
    """Name the class of an upstream error.

    Called on an upstream ``Error`` event and on upstream failures. Stops at the first
    non-None result.

    :param error: the upstream's error text.
    :param run: the run it happened in.
    :returns: an error class name such as ``"SESSION_VISUAL_CONTEXT_UNSUPPORTED"``, or
        ``None`` to let the next plugin try.
    """


@hookspec(firstresult=True)
@answers(optional(RecoveryPlan), "None or a RecoveryPlan", pool=LIFECYCLE_POOL)
def plan_recovery(error_class: str, run: Any, attempts: Sequence[Any]) -> RecoveryPlan | None:
    """Plan how a run recovers from a classified error.

    Called after `classify_error` named a class. Stops at the first non-None result. Each
    kind of recovery runs at most its plan's ``retries`` times per run (once by default);
    before each, the failed goose request is cancelled.

    :param error_class: what `classify_error` answered.
    :param run: the run.
    :param attempts: the run's attempts so far, oldest first.
    :returns: a `RecoveryPlan`, or ``None`` to let the next plugin try (no plan: the run ends
        with its ``Error``).
    """


# --- heartbeat -------------------------------------------------------------------------------


def tmux_session_or_none(value: object) -> bool:
    return value is None or is_tmux_session_id(value)


@hookspec(firstresult=True)
@answers(tmux_session_or_none, "None or a tmux session id (1 to 256 printable characters)")
def resolve_tmux_session(scope: Scope) -> str | None:
    """Tell which tmux session an observed request of the wrapped app belongs to.

    Called per request the execution-state observer sees, and for the request that starts a
    run (its stream is then bound to that tmux session). It is called in the event loop, for
    every request: answer from the scope and from memory, never from a database or a file.
    Stops at the first non-None result.

    :param scope: the request's ASGI scope.
    :returns: the tmux session id, or ``None`` when the request is none of its business.
    """


@hookspec(firstresult=True)
@answers(DECISION, DECISION_EXPECTED, pool=HEARTBEAT_POOL)
def heartbeat_policy(state: Any, now: float) -> str | None:
    """Override the built-in order of a heartbeat decision.

    Called on every heartbeat decision, before the built-in order. Stops at the first non-None
    result.

    :param state: the tmux session's execution state.
    :param now: the time of the decision (epoch seconds).
    :returns: ``"allow"`` or ``"skip"`` to decide, or ``None`` for the built-in order.
    """


@hookspec(firstresult=True)
# A reader that fails cannot vouch for the pane: its failure is a skip.
@answers(DECISION, DECISION_EXPECTED, on_failure="skip", pool=HEARTBEAT_POOL)
def heartbeat_fallback(tmux_session_id: str) -> str | None:
    """Read the agent's screen: decide a heartbeat when the observed state is ``UNKNOWN``, and
    confirm every allow.

    Called when the built-in order cannot decide, and before any ``"allow"`` takes effect (for
    example by a tmux pane heuristic): an answer other than ``"allow"`` turns it into a skip.
    A plugin that reads the screen answers ``"skip"`` for what it cannot read as idle; raising,
    or answering slower than the fallback timeout, counts as ``"skip"``. Stops at the first
    non-None result.

    :param tmux_session_id: the tmux session.
    :returns: ``"allow"``, ``"skip"``, or ``None`` to let the next plugin try (no plugin
        answering: the allow stands on the traffic alone; ``UNKNOWN`` is a skip).
    """


# --- identity and authorization --------------------------------------------------------------


@hookspec(firstresult=True)
@answers(
    identified,
    "None or a Principal not of the anonymous method",
    on_failure=REFUSED,
    timed=True,
    unavailable_raises=True,
    pool=IDENTITY_POOL,
)
def resolve_principal(scope: Scope) -> Principal | None:
    """Say who a request is from.

    Called once per request by the identity stage, before any route and before the wrapped
    app, in a worker thread: a slow resolver delays only its own request, yet that request waits
    for it, so answer from the request and from memory when you can. Stops at the first
    non-None result. Raising, answering something that is not a `Principal`, or taking longer
    than the gateway's ``plugin_timeout`` refuses the request (401). A resolver the gateway
    cannot ask (no identity thread free within the timeout, or ``plugin_hung_limit`` calls of
    it hung) is no verdict: the request is answered 503 with ``Retry-After``.

    :param scope: the request's ASGI scope (headers, client address, ...).
    :returns: a `Principal`, or ``None`` to let the next resolver try.
    """


@hookspec(firstresult=True)
@answers(
    lambda value: value is None or (isinstance(value, tuple) and len(value) == 2),
    "None or (reader, ended)",
)
def cookie_logins() -> tuple[Any, Any] | None:
    """Say how the wrapped Flask app's session cookie is read, and where its ended logins are
    noted, so that a logout the app answers ends that login at once.

    Called once when the `Gateway` is made, after `configure_plugin`. Stops at the first
    non-None result. The identity stage then notes the login of every response that clears a
    cookie principal's session, and the Socket.IO server closes that login's sockets.

    :returns: ``(reader, ended)``: the `FlaskSessionReader` that reads the cookie
        (`gateway_kit.identity.flask_session`) and the `EndedLogins` where logouts are noted
        (`gateway_kit.identity.logins`); or ``None`` when this plugin reads no cookie.
    """


@hookspec(firstresult=True)
@answers(
    allowed_or_refused,
    "True, False or None",
    on_failure=False,
    timed=True,
    unavailable_raises=True,
    pool=AUTHORIZATION_POOL,
)
def authorize_subscription(principal: Principal, stream: str, action: str) -> bool | None:
    """Decide whether a principal may read a stream, or take it.

    Called before any client reads a stream: over SSE, as JSON pages, as a run's stream, and by
    the legacy task poll; once per request, never per event; and before a run's starter takes a
    stream nobody owns (``action="claim"``). It runs in a worker thread, so it
    may block briefly (a database lookup). Stops at the first non-None result. Raising,
    answering something that is not a bool, or taking longer than the gateway's
    ``plugin_timeout`` refuses the read (403); a plugin the gateway cannot ask (as for
    `resolve_principal`) is a 503 with ``Retry-After``.

    :param principal: who asks.
    :param stream: the stream (conversation) to read.
    :param action: what the principal is about to do: ``"read"`` (`READ`: read the stream, or
        use its runs and approvals), or ``"claim"`` (`CLAIM`: start the first run of a stream
        that holds no event and has no owner, and so become its owner). A plugin may leave
        this argument out: it then answers every action alike.
    :returns: ``True`` to allow, ``False`` to refuse, or ``None`` to let the next plugin decide
        (when every plugin says ``None``, nobody but the stream's owner may read it).
    """


# --- plugin settings -------------------------------------------------------------------------


@hookspec
@answers(anything, "anything", on_failure=RAISE)
def configure_plugin(config: Mapping[str, Any], context: PluginContext) -> None:
    """Receive this plugin's settings, and the gateway it serves.

    Called once per plugin when the `Gateway` is made, with that plugin's own entry of
    ``Gateway(plugin_config={name: {...}})`` (an empty mapping when it has none). Raise
    ``ValueError`` for settings that cannot work: making the gateway then fails, naming the
    plugin.

    :param config: this plugin's settings.
    :param context: the gateway's log, the wrapped app and the prefix (`PluginContext`).
    :returns: nothing; the result is ignored.
    """
