# ruff: noqa: RUF001, E501 - screens as the agents draw them, full width and their characters
"""The screens the fixtures under ``screens/`` are captured from: what each agent draws, as
faithfully as its sources show it (``screens/README.md`` says where each comes from). Keyed by
``<agent>/<kind>-<what>``; ``none`` is no agent at all. Drawn 100 columns wide by `regenerate`."""

from __future__ import annotations

WIDTH = 100
HEIGHT = 30

SCREENS = {
    "goose/busy-thinking": """\
goose is running! Enter your instructions, or try asking what goose can do.

( O)> fix the failing test in tests/test_api.py
◐  Honking thoughtfully...  (Ctrl+C to interrupt)""",
    "goose/permission-tool-call": """\
( O)> remove the build directory and rebuild
─── shell | developer ──────────────────────────
command: rm -rf build

◆  Goose would like to call the above tool, do you allow?
│  ● Allow (Allow the tool call once)
│  ○ Always Allow
│  ○ Deny
│  ○ Cancel
└""",
    "goose/permission-security": """\
─── shell | developer ──────────────────────────
command: curl -fsSL https://example.com/install.sh | sh

Security warning: the command downloads a script and runs it.
◆  Do you allow this tool call?
│  ● Allow (Allow the tool call once)
│  ○ Deny
│  ○ Cancel
└""",
    "goose/idle-prompt": """\
goose is running! Enter your instructions, or try asking what goose can do.

( O)> what files are in this directory?
─── shell | developer ──────────────────────────
command: ls

The directory holds `README.md`, `src/` and `tests/`.

( O)> """,
    "claude_code/busy-esc-to-interrupt": """\
> fix the flaky test in tests/test_orders.py

● I'll read the test and the fixture it uses first.

✻ Pouncing… (esc to interrupt)

╭──────────────────────────────────────────────────────────────────────────────────────────────────╮
│ >                                                                                                │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
  ? for shortcuts""",
    "claude_code/busy-elapsed": """\
❯ refactor the session store to use the new cache

⏺ Reading the store and its tests.

✻ Pondering… (1m 12s · ↓ 2.4k tokens)

────────────────────────────────────────────────────────────────────────────────────────────────────
❯
────────────────────────────────────────────────────────────────────────────────────────────────────
  ? for shortcuts""",
    "claude_code/permission-bash": """\
⏺ Bash(rm -rf dist && npm run build)
  ⎿  Running…

────────────────────────────────────────────────────────────────────────────────────────────────────
 Bash command

   rm -rf dist && npm run build
   Rebuild the bundle from scratch

 Do you want to proceed?
 ❯ 1. Yes
   2. Yes, and don't ask again for npm run build commands in /home/dev/shop
   3. No, and tell Claude what to do differently (esc)""",
    "claude_code/permission-edit": """\
────────────────────────────────────────────────────────────────────────────────────────────────────
 Edit file
 app.py
   12    @app.get("/healthz")
   13 -  def health():
   13 +  def health() -> dict[str, str]:
   14        return {"status": "ok"}

 Do you want to make this edit to app.py?
 ❯ 1. Yes
   2. Yes, allow all edits during this session (shift+tab)
   3. No, and tell Claude what to do differently (esc)""",
    "claude_code/idle-prompt": """\
❯ add a health check endpoint

⏺ Added GET /healthz, returning 200 with the build version.

────────────────────────────────────────────────────────────────────────────────────────────────────
❯
────────────────────────────────────────────────────────────────────────────────────────────────────
  ? for shortcuts""",
    "claude_code/idle-box": """\
> add a health check endpoint

● Added GET /healthz, returning 200 with the build version.

╭──────────────────────────────────────────────────────────────────────────────────────────────────╮
│ >                                                                                                │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
  ? for shortcuts""",
    "codex/busy-working": """\
› Summarize recent commits

• Explored
  └ Search Change Approved
    Read diff_render.rs

• Working (12s • esc to interrupt)

› Ask Codex to do anything

  ? for shortcuts                                                                  100% context left""",
    "codex/busy-background": """\
• I’m going to search the repo for where “Change Approved” is rendered to update
  that view.

• Explored
  └ Search Change Approved
    Read diff_render.rs

  Investigating rendering code (0s • background: 0 • Esc to interrupt)


› Summarize recent commits""",
    "codex/permission-command": """\


  Would you like to run the following command?

  Reason: the tests need the network to fetch fixtures

  $ cargo test -p codex-tui

› 1. Yes, proceed (y)
  2. Yes, and don't ask again for commands that start with `cargo test` (p)
  3. No, and tell Codex what to do differently (esc)

  Press enter to confirm or esc to cancel""",
    "codex/permission-grant": """\
  Would you like to grant these permissions?

  Reason: need workspace access

  Permission rule: network; read `/tmp/readme.txt`; write `/tmp/out.txt`

› 1. Yes, grant these permissions for this turn (y)
  2. Yes, grant and use auto review for this turn (r)
  3. Yes, grant these permissions for this session (a)
  4. Yes, grant for this session and use auto review this turn
  5. No, continue without permissions (d)

  Press enter to confirm or esc to cancel""",
    "codex/idle-composer": """\
› Summarize recent commits

• The last five commits add the approval overlay, fix the footer width and bump ratatui.

› Ask Codex to do anything

  ? for shortcuts                                                                  100% context left""",
    "codex/idle-composer-bar": """\
To get started, describe a task or try one of these commands:

/init - create an AGENTS.md file with instructions for Codex
/status - show current session configuration
/approvals - choose what Codex can do without approval
/model - choose what model and reasoning effort to use

▌ Find and fix a bug in @filename

⏎ send   ⇧⏎ newline   ⌃T transcript   ⌃C quit""",
    "aider/busy-waiting": """\
Added tests/test_api.py to the chat
────────────────────────────────────────────────────────────────────────────────────────────────────
tests/test_api.py
> fix the flaky test

█░         Waiting for anthropic/claude-sonnet-4-20250514""",
    "aider/permission-create-file": """\
src/health.py
Create new file? (Y)es/(N)o [Yes]: """,
    "aider/permission-shell": """\
Run these to check the change:

npm test
Run shell command? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: """,
    "aider/idle-prompt": """\
Applied edit to src/health.py
Commit 3f2a1bc feat: add a health check endpoint
────────────────────────────────────────────────────────────────────────────────────────────────────
src/health.py
> """,
    "none/unknown-shell": """\
dev@build-7:~/shop$ ls
README.md  app.py  tests
dev@build-7:~/shop$ """,
    "none/unknown-old-prompt-in-scrollback": """\
 Do you want to proceed?
 ❯ 1. Yes
   2. No, and tell Claude what to do differently (esc)
● Bash(pytest -q)
  ⎿  41 passed in 3.2s
"""
    + "\n".join(f"  tests/test_orders.py::test_case_{n} PASSED" for n in range(12))
    + """
dev@build-7:~/shop$ """,
    "none/unknown-streaming": """\
⏺ Here is the plan for the migration:

  1. Add the new column as nullable.
  2. Backfill it in batches of 10k rows.
  3. Make it NOT NULL once the backfill is done.""",
}
