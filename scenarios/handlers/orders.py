"""An example handler (docs/handlers.md): an order service's consumer, in the loop of
scenarios/own-handler.yaml.

Each message is an order as JSON. The handler parses it, refuses an order without items (it can
never be processed: rejected, so it is not delivered again), saves the others with a blocking
"database call" (time.sleep standing in for the driver), and asks for a retry when the database
is busy (requeued, delivered again). A body that is not JSON raises, and the group's `on_error`
settles it (discard: a poison message must not loop). sojourn traces each delivery's outcome and
the handler's wall time as its processing time.
"""

from __future__ import annotations

import json
import time

BUSY_EVERY = 50
"""Every 50th order finds the database busy on its first delivery (a transient failure)."""


def handle(message):
    order = json.loads(message.body)  # not JSON: raises, settled as on_error says
    if not order.get("items"):
        return "reject"  # nothing to process, now or later
    if order["id"] % BUSY_EVERY == 0 and not message.redelivered:
        return "requeue"  # try again later
    save(order)
    return "ack"


def save(order) -> None:
    """Stands in for an INSERT: about 2 ms, plus 0.5 ms per item, blocking the calling thread."""
    time.sleep(0.002 + 0.0005 * len(order["items"]))
