"""The shipped example handler (scenarios/handlers/orders.py), called as docs/handlers.md shows:
with a Message built by hand. Expected outcomes come from the orders' own fields."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pika
import pytest

from loadgen.users.handler import Message

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios"))
from handlers.orders import BUSY_EVERY, handle


def _message(order, redelivered=False) -> Message:
    body = order if isinstance(order, bytes) else json.dumps(order).encode()
    return Message(body, pika.BasicProperties(headers={}), {}, "orders", "", redelivered)


def test_an_order_with_items_is_saved_and_acked():
    assert handle(_message({"id": 1, "items": [{"sku": "S1", "qty": 2}]})) == "ack"


def test_an_order_without_items_is_rejected():
    assert handle(_message({"id": 2, "items": []})) == "reject"


def test_a_busy_database_asks_for_a_retry_once():
    order = {"id": BUSY_EVERY, "items": [{"sku": "S1", "qty": 1}]}
    assert handle(_message(order)) == "requeue"
    assert handle(_message(order, redelivered=True)) == "ack"


def test_a_body_that_is_not_json_raises():
    with pytest.raises(ValueError):
        handle(_message(b'{"id": 3, "items": ['))
