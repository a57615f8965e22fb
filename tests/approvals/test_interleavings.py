"""Random interleavings of claims, decisions, expiries, sweeps, restarts of the gateway and of
goose, and lost sendings: goose never gets two different answers for one invocation, and never
an allow after the expiry."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog
from gateway_kit.approvals import ApprovalService, ApprovalSettings, ApprovalStore, Status
from gateway_kit.approvals.delivery import ApprovalDelivery
from gateway_kit.approvals.goose_actions import ActionRequest
from gateway_kit.exceptions import ApprovalClosed, UpstreamUnavailable
from gateway_kit.principal import Principal

EXPIRY = 10.0
ASKED = ActionRequest("tool_confirmation", "call_1", "shell", {"command": "make"}, None)


@dataclass
class Goose:
    """The upstream as the delivery sees it: records what it was sent; may be unreachable."""

    sent: list[tuple[str, str]] = field(default_factory=list)
    down: bool = False

    async def confirm_tool_action(self, session_id: str, tool_request_id: str, action: str) -> None:
        if self.down:
            raise UpstreamUnavailable("goose is down")
        self.sent.append((tool_request_id, action))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


operations = st.one_of(
    st.tuples(st.just("claim"), st.sampled_from(["ann", "bob"])),
    st.tuples(
        st.just("decide"),
        st.sampled_from(["ann", "bob"]),
        st.sampled_from(["approve", "reject"]),
        st.booleans(),  # the right arguments
    ),
    st.tuples(st.just("tick"), st.floats(min_value=0.0, max_value=8.0)),
    st.just(("sweep",)),
    st.just(("restart",)),
    st.just(("goose_restart",)),
    st.just(("goose_answers",)),
    st.tuples(st.just("goose_down"), st.booleans()),
)


class World:
    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.clock = Clock()
        self.goose = Goose()
        self.settings = ApprovalSettings(
            expiry=EXPIRY, redeliver_after=1.0, max_redeliver_delay=2.0
        )
        self.service, self.delivery = self._gateway()
        self.approval_id = ""
        self.allowed_at: float | None = None

    def _gateway(self) -> tuple[ApprovalService, ApprovalDelivery]:
        service = ApprovalService(ApprovalStore(self.log), self.settings, clock=self.clock)
        return service, ApprovalDelivery(service, self.goose)  # type: ignore[arg-type]

    async def start(self) -> None:
        approval, _ = await self.service.request(
            ASKED, stream="conv", run_id=None, session_id="s1", lifetime=0
        )
        self.approval_id = approval.approval_id

    async def apply(self, operation: tuple[object, ...]) -> None:
        kind = operation[0]
        service = self.service
        if kind == "claim":
            with contextlib.suppress(ApprovalClosed):
                await service.claim(self.approval_id, Principal(str(operation[1]), "bearer"))
        elif kind == "decide":
            _, user, decision, right = operation
            current = await service.get(self.approval_id)
            hashed = current.args_hash if right else "0" * 64
            try:
                decided = await service.decide(
                    self.approval_id, Principal(str(user), "bearer"),
                    decision=str(decision), args_hash=hashed,
                )  # fmt: skip
            except ApprovalClosed:
                return
            assert right, "a decision for other arguments was taken"
            assert self.clock.now < decided.expires_at, "a decision was taken after the expiry"
            if decided.status == Status.APPROVED:
                self.allowed_at = self.clock.now
        elif kind == "tick":
            self.clock.now += float(operation[1])  # type: ignore[arg-type]
        elif kind == "sweep":
            await service.sweep()
        elif kind == "restart":  # the process dies: its sendings in flight die with it
            await self.delivery.stop()
            self.service, self.delivery = self._gateway()
        elif kind == "goose_restart":
            await service.lifetime_ended("s1", 1)
        elif kind == "goose_answers" and self.goose.sent:
            await service.delivered("s1", ["call_1"])
        elif kind == "goose_down":
            self.goose.down = bool(operation[1])
        await self.delivery.wait_idle()

    async def check(self) -> None:
        actions = {action for _, action in self.goose.sent}
        assert len(actions) <= 1, f"goose was sent different answers: {self.goose.sent}"
        approval = await self.service.get(self.approval_id)
        if "allow_once" in actions:
            assert self.allowed_at is not None
            assert self.allowed_at < approval.expires_at
            assert approval.status in (Status.APPROVED, Status.VOIDED)
        if approval.status == Status.EXPIRED:
            assert actions <= {"deny_once"}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(operations, min_size=1, max_size=25))
def test_goose_gets_one_answer_at_most_and_no_allow_after_the_expiry(
    steps: list[tuple[object, ...]],
) -> None:
    async def play(path: Path) -> None:
        with EventLog(f"sqlite:///{path}") as log:
            world = World(log)
            await world.start()
            try:
                for step in steps:
                    await world.apply(step)
                    await world.check()
                # however it went, a last look in time settles it: nothing stays pending
                world.clock.now += EXPIRY + 1
                await world.apply(("sweep",))
                await world.check()
                final = await world.service.get(world.approval_id)
                assert final.status != Status.PENDING
            finally:
                await world.delivery.stop()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(play(Path(folder) / "log.db"))
