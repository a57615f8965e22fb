"""Processes for log_postgres.py: writers and a reader, started once and reused by every run."""

from __future__ import annotations

import queue
import time
import traceback
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import psycopg
from _pg_methods import prepare_table, table_of, writer_main
from _pg_reader import reader_main

START_TIMEOUT = 120  # seconds for every process to be connected and ready
RUN_TIMEOUT = 900  # seconds for one run, in case a lock is never released


@dataclass
class Outcome:
    rate: float  # events/s, from the first writer's start to the last writer's end
    committed: int
    missed: int  # committed but never seen by the reader
    duplicates: int
    out_of_order: int  # reads whose seq was not above the previous one
    per_commit: float  # appends per transaction: group commit at work
    catch_up: float  # seconds from the last writer's end until the reader had seen it all


def serve(tasks: Any, gate: Any, done: Any, results: Any) -> None:
    """One benchmark process: run writer or reader tasks until told to stop."""
    while (task := tasks.get()) is not None:
        role, kwargs = task
        try:
            if role == "writer":
                writer_main(**kwargs, gate=gate, results=results)
            else:
                reader_main(**kwargs, gate=gate, done=done, results=results)
        except BaseException:
            gate.abort()  # nobody waits forever for a process that failed
            results.put(("error", traceback.format_exc()))


class Workers:
    def __init__(self, ctx: Any, writers: int) -> None:
        self.writers = writers
        self.gate = ctx.Barrier(writers + 2)  # the writers, the reader, and us
        self.done = ctx.Event()
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(writers + 1)]
        self.procs = [
            ctx.Process(target=serve, args=(q, self.gate, self.done, self.results), daemon=True)
            for q in self.tasks
        ]
        for proc in self.procs:
            proc.start()

    def run(
        self, admin: psycopg.Connection[Any], url: str, method: str, threads: int, events: int,
        poll: float,
    ) -> Outcome:  # fmt: skip
        prepare_table(admin, method)
        self.done.clear()
        job = {"method": method, "url": url}
        for index in range(self.writers):
            self.tasks[index].put(
                ("writer", {**job, "index": index, "threads": threads, "events": events})
            )
        self.tasks[-1].put(("reader", {**job, "poll": poll}))
        self.gate.wait(timeout=START_TIMEOUT)
        spans = []
        for _ in range(self.writers):
            _role, start, end, errors = self._next_result()
            if errors:
                raise RuntimeError(f"{method}: a writer failed: {errors[0]}")
            spans.append((start, end))
        self.done.set()
        _role, caught_up, seen = self._next_result()
        first, last = min(s for s, _ in spans), max(e for _, e in spans)

        table = table_of(method)
        committed = {row[0] for row in admin.execute(f"SELECT seq FROM {table}")}
        if len(committed) != self.writers * events:
            raise RuntimeError(f"{method}: {len(committed)} rows for {self.writers * events}")
        # Every row of one transaction shares its created_at.
        commits = admin.execute(f"SELECT count(DISTINCT created_at) FROM {table}").fetchone()
        seen_set = set(seen)
        return Outcome(
            rate=len(committed) / (last - first),
            committed=len(committed),
            missed=len(committed - seen_set),
            duplicates=len(seen) - len(seen_set),
            out_of_order=sum(1 for a, b in pairwise(seen) if b <= a),
            per_commit=len(committed) / commits[0] if commits else 0.0,
            catch_up=caught_up - last,
        )

    def _next_result(self) -> Any:
        deadline = time.monotonic() + RUN_TIMEOUT
        while time.monotonic() < deadline:
            try:
                result = self.results.get(timeout=1)
            except queue.Empty:
                if not all(p.is_alive() for p in self.procs):
                    raise RuntimeError("a benchmark process died") from None
                continue
            if result[0] == "error":
                raise RuntimeError(f"a benchmark process failed:\n{result[1]}")
            return result
        raise RuntimeError(f"no result after {RUN_TIMEOUT} s")

    def stop(self) -> None:
        for tasks in self.tasks:
            tasks.put(None)
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
