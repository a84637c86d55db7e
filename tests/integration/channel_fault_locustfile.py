"""A second locustfile for tests/integration/test_channel_faults.py, loaded beside sojourn's
(`locust -f loadgen/locustfile.py,tests/integration/channel_fault_locustfile.py`): at
SOJOURN_TEST_BAD_ACK_AT_S seconds into the run, every consumer of this process acks a delivery tag
its channel never had, and the broker closes that channel with 406 PRECONDITION_FAILED, as it
would for a client that confused its tags. Nothing else of the run is touched; it defines no users."""

from __future__ import annotations

import os

import gevent
from locust import events

from loadgen.run import locust_session
from loadgen.users.consumer import Consumer

BAD_TAG = 1_000_000


def _bad_ack_later() -> None:
    at_s = float(os.environ["SOJOURN_TEST_BAD_ACK_AT_S"])
    ctx = locust_session.context()
    ctx.started.wait()
    ctx.sleep_until(at_s, ctx.stopping)
    for participant in list(ctx.participants):
        link = getattr(participant, "_link", None)
        if isinstance(participant, Consumer) and link is not None and link.is_open:
            link.ack(BAD_TAG, now=True)


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs):
    if os.environ.get("SOJOURN_TEST_BAD_ACK_AT_S"):
        gevent.spawn_later(0.1, _bad_ack_later)  # after sojourn's own test_start made the run's context
