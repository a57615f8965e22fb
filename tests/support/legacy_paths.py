"""The example app's legacy surfaces as `Gateway`'s flat keywords, for tests whose legacy clients
read them: a gateway takes none of an app's paths unless asked (a test's own keyword wins)."""

from __future__ import annotations

EXAMPLE_LEGACY = {
    "legacy_tasks_path": "/api/tasks",
    "legacy_usage_path": "/api/usage",
    "legacy_socket_token_path": "/api/socket-token",
    "legacy_approvals_path": "/api/plan-approvals/pending",
}
