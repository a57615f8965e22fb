"""The publish guard holding a run an app writes itself (`owned_run`, the app's flat `Message`
events): each of the app's turns is read for what it claimed, as goose's turns are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway_kit import EventLog, Gateway, OwnedRun, owned_run
from tests.support.waiting import settled

from .publish import NAME, OWNER, page, public_root, template

STREAM = "conversation"


def say(run: OwnedRun, message_id: str, *chunks: str) -> None:
    for chunk in chunks:
        run.append("Message", {"role": "assistant", "message_id": message_id, "text": chunk})


def test_a_follow_up_saying_done_does_not_take_back_the_pages_claimed_before(
    log: EventLog, tmp_path: Path
) -> None:
    gateway = Gateway(log=log, plugin_config={NAME: {"public_root": template(tmp_path)}})
    root = public_root(tmp_path)
    prompts: list[str] = []
    holder: dict[str, OwnedRun] = {}

    def follow_up(prompt: str) -> None:  # writes one missing page a turn, and claims nothing
        prompts.append(prompt)
        name = "a.html" if len(prompts) == 1 else "b.html"
        (root / name).write_text(page(title=name))
        say(holder["run"], f"m_follow_up_{len(prompts)}", "Done.")

    with owned_run(
        log,
        stream=STREAM,
        run_id="task-1",
        owner=OWNER,
        guards=gateway.run_guards,
        follow_up=follow_up,
    ) as run:
        holder["run"] = run
        run.append("Message", {"role": "user", "message_id": "m_user", "text": "two pages"})
        say(run, "m_1", "The pages are published: ", "public/a.html", " and public/b.html")
        run.append("Finish", {"reason": "stop"})

    settled(log)
    events = log.read(run_id="task-1")
    started: list[dict[str, Any]] = [e.data for e in events if e.type == "FollowUpStarted"]
    assert [data["missing"] for data in started] == [
        ["public/a.html", "public/b.html"],
        ["public/b.html"],  # the first turn's claim still holds after the follow-up's "Done."
    ]
    assert "- public/b.html" in prompts[1]
    assert [e.type for e in events][-1] == "Finish" and events[-1].data == {"reason": "stop"}


def test_an_apps_turn_that_claims_nothing_is_left_alone(log: EventLog, tmp_path: Path) -> None:
    gateway = Gateway(log=log, plugin_config={NAME: {"public_root": template(tmp_path)}})
    with owned_run(
        log, stream=STREAM, run_id="task-1", owner=OWNER, guards=gateway.run_guards
    ) as run:
        say(run, "m_1", "You could make ", "public/a.html", " some day.")
    settled(log)
    events = log.read(run_id="task-1")
    assert [e.type for e in events] == ["Message"] * 3 + ["Finish"]
    assert events[-1].data == {}
