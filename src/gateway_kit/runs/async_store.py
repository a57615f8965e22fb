"""`AsyncRunStore`: the run store as the async services use it.

The same calls as `RunStore`'s, each made in a worker thread (the database blocks; the event
loop must not), so that a service reads top to bottom: ``await self.runs.get(run_id)``. The
hop into the thread is written here once, not at every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from ..log import Event, EventLog
from .reading import read_all
from .store import RunStore

P = ParamSpec("P")
T = TypeVar("T")


def in_thread(call: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """`call`, awaited: made in a worker thread."""

    async def awaited(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(call, *args, **kwargs)

    return awaited


class _InThread(Generic[P, T]):
    """The `RunStore` method of the same name, awaited: looked up on the store at each call
    (a store whose method was replaced is called as it is now)."""

    def __init__(self, method: Callable[Concatenate[RunStore, P], T]) -> None:
        self.name = method.__name__

    def __get__(
        self, face: AsyncRunStore, owner: type[AsyncRunStore]
    ) -> Callable[P, Coroutine[Any, Any, T]]:
        call: Callable[P, T] = getattr(face.sync, self.name)
        return in_thread(call)


class AsyncRunStore:
    """:param store: the run store whose calls are made in worker threads."""

    def __init__(self, store: RunStore) -> None:
        self.sync = store

    # runs
    create = _InThread(RunStore.create)
    get = _InThread(RunStore.get)
    active_run = _InThread(RunStore.active_run)
    active_runs = _InThread(RunStore.active_runs)
    active_count = _InThread(RunStore.active_count)
    latest_ended_run = _InThread(RunStore.latest_ended_run)
    by_upstream_request = _InThread(RunStore.by_upstream_request)
    request_cancel = _InThread(RunStore.request_cancel)
    end = _InThread(RunStore.end)
    settle = _InThread(RunStore.settle)
    # attempts
    attempts = _InThread(RunStore.attempts)
    add_attempt = _InThread(RunStore.add_attempt)
    # stream → goose session bindings
    binding = _InThread(RunStore.binding)
    bind = _InThread(RunStore.bind)
    rebind = _InThread(RunStore.rebind)


async def run_events(log: EventLog, run_id: str, types: Collection[str] = ()) -> list[Event]:
    """Every committed event of the run (of `types`, if given), oldest first (`read_all`)."""
    return await asyncio.to_thread(read_all, log, run_id, types)
