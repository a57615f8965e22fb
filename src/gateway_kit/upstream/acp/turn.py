"""One prompt of a session, written as the gateway's events.

`emit` is called with every event, in the order the agent sent the updates, from the task
reading the connection (it must not block: append, or put in a queue), and last with exactly
one ``Finish`` or ``Error``. The turn takes the updates the agent sent before it answered the
prompt; history that ``session/load`` replays first is not the turn's and is left out.

One case emits nothing: a session that already has a prompt running raises `AcpSessionBusy`,
as a goose session that is busy refuses the run before it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...exceptions import UpstreamError
from .errors import AcpRequestError, AcpSessionBusy
from .translate import TranslatedEvent, TurnState, error_event, finish_event, translate
from .updates import AcpUpdate
from .upstream import AcpUpstream, PromptResult

Emit = Callable[[TranslatedEvent], None]


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """How the turn ended: its last event, and the prompt's result or the error."""

    event: TranslatedEvent
    result: PromptResult | None = None
    error: UpstreamError | None = None


class AcpTurn:
    def __init__(
        self,
        upstream: AcpUpstream,
        session_id: str,
        *,
        emit: Emit,
        request_id: str | None = None,
        state: TurnState | None = None,
    ) -> None:
        self.upstream = upstream
        self.session_id = session_id
        self.emit = emit
        self.state = state if state is not None else TurnState(request_id=request_id)

    def _take(self, update: AcpUpdate) -> None:
        if update.replay:
            return
        for event in translate(update.update, self.state):
            self.emit(event)

    async def run(
        self, prompt: str | Sequence[Any], *, meta: Mapping[str, Any] | None = None
    ) -> TurnEnd:
        stop = self.upstream.listen(self.session_id, self._take, until_answered=True)
        try:
            result = await self.upstream.prompt(self.session_id, prompt, meta=meta)
        except AcpSessionBusy:
            raise
        except UpstreamError as exc:
            rpc_error = exc.to_json() if isinstance(exc, AcpRequestError) else None
            end = TurnEnd(error_event(str(exc), self.state, rpc_error=rpc_error), error=exc)
        else:
            finish = finish_event(
                result.stop_reason, self.state, reported=result.reported, usage=result.usage
            )
            end = TurnEnd(finish, result=result)
        finally:
            stop()
        self.emit(end.event)
        return end

    async def cancel(self) -> bool:
        """Cancel the turn; `run` returns within the upstream's cancel deadline."""
        return await self.upstream.cancel(self.session_id)
