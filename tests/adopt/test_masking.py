"""The masking rule: what differs between two runs of one app compares equal, what an answer
is about does not."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway_kit.adopt.masking import mask_cookie, mask_json, mask_text

NOW = time.time()
near_now = st.floats(min_value=NOW - 5 * 365 * 86400, max_value=NOW + 5 * 365 * 86400)


def order(order_id: uuid.UUID, at: float, token: bytes, count: int) -> dict[str, Any]:
    when = datetime.fromtimestamp(at, UTC)
    return {
        "id": str(order_id),
        "created_at": when.isoformat(),
        "created": int(at),
        "created_ms": int(at * 1000),
        "modified": when.strftime("%a, %d %b %Y %H:%M:%S GMT"),
        "etag": token.hex(),
        "by": {str(order_id): "ada"},
        "count": count,
    }


@given(st.uuids(), st.uuids(), near_now, near_now, st.binary(min_size=8, max_size=32),
       st.binary(min_size=8, max_size=32))  # fmt: skip
def test_two_runs_of_one_answer_mask_alike(
    id_a: uuid.UUID, id_b: uuid.UUID, at_a: float, at_b: float, token_a: bytes, token_b: bytes
) -> None:
    assert mask_json(order(id_a, at_a, token_a, 2)) == mask_json(order(id_b, at_b, token_b, 2))


@given(st.uuids(), near_now, st.binary(min_size=8, max_size=32), st.integers(0, 10**6))
def test_what_an_answer_is_about_is_not_masked(
    order_id: uuid.UUID, at: float, token: bytes, count: int
) -> None:
    masked = mask_json(order(order_id, at, token, count))
    assert masked["count"] == count
    assert mask_json(order(order_id, at, token, count + 1)) != masked


def test_each_placeholder() -> None:
    assert mask_text("id 550e8400-E29B-41d4-a716-446655440000.") == "id <uuid>."
    assert mask_text("at 2024-05-01T10:00:04.102+02:00 or 2024-05-01 10:00Z") == (
        "at <time> or <time>"
    )
    assert mask_text("on 2024-05-01, sku A-1") == "on 2024-05-01, sku A-1"  # a date alone is kept
    assert mask_text("sha 0a1b2c3d4e5f6071 and cafe") == "sha <hex> and cafe"
    assert mask_text("t=Wq3x9RkT0aZb7yLmN2cVd8fH; name=create_order_for_customer") == (
        "t=<token>; name=create_order_for_customer"
    )
    now = int(NOW)
    assert mask_text(f"at {now} or {now * 1000} or {now}.25; 123456789012345") == (
        "at <epoch> or <epoch> or <epoch>; 123456789012345"
    )
    long_ago = int(NOW - 11 * 365.25 * 86400)  # not within ten years: a number like any other
    assert mask_text(f"price {long_ago}") == f"price {long_ago}"


def test_a_random_token_without_a_digit_is_masked_and_a_long_camel_case_name_is_not() -> None:
    # secrets.token_urlsafe(24) gives one without a digit about once in 250 calls.
    assert mask_text("FJnEqcapGxHPgQNWzFZKvTvfTUKXiUdb") == "<token>"
    assert mask_text("getUserByIdentifierAndName") == "getUserByIdentifierAndName"


def test_keys_that_mask_alike_stay_apart() -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    assert mask_json({a: 1, b: 2}) == {"<uuid>": 1, "<uuid>#2": 2}


def test_a_cookies_long_value_is_masked_and_its_attributes_kept() -> None:
    assert mask_cookie("session=eyJ1c2VyIjoiYWRhIn0.ZjK1aA.x; HttpOnly; Path=/") == (
        "session=<value>; HttpOnly; Path=/"
    )
    assert mask_cookie("theme=dark; Path=/") == "theme=dark; Path=/"
