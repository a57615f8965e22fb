"""The example app's legacy surfaces as `Gateway` keywords, for tests whose legacy clients read
them: a gateway takes none of an app's paths unless asked (a test's own ``legacy=`` wins)."""

from __future__ import annotations

from gateway_kit import LegacySurfaces

EXAMPLE_LEGACY = {
    "legacy": LegacySurfaces(
        tasks="/api/tasks",
        usage="/api/usage",
        socket_token="/api/socket-token",
        approvals="/api/plan-approvals/pending",
    )
}
