"""Fixtures of the stream tests: a `Gateway` over the shared `log` fixture (every backend)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gateway_kit import EventLog, Gateway
from tests.support.legacy_paths import EXAMPLE_LEGACY

MakeGateway = Callable[..., Gateway]
LISTENER_TIMEOUT = 10.0


@pytest.fixture
def make_gateway(log: EventLog) -> MakeGateway:
    def make(app: Any = None, **options: Any) -> Gateway:
        legacy = {} if "legacy" in options else EXAMPLE_LEGACY  # given one way only
        return Gateway(app, log=log, **{"allow_anonymous": True, **legacy, **options})

    return make


@pytest.fixture
def gateway(make_gateway: MakeGateway) -> Gateway:
    return make_gateway()
