"""Publisher-side outcomes against the real broker: mandatory publishes no queue takes come back
as `returned`, and a priority mix sends each priority in its share."""

from __future__ import annotations

from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

SCENARIO = """
name: it-publisher-outcomes
queue: {name: sojourn.it.outcomes, purge_on_start: true, arguments: {x-max-priority: 5}, delete_on_end: true}
run: {duration_s: 3, drain_timeout_s: 10}
producers:
  - {name: lost, rate: 40, confirms: true, mandatory: true, exchange: amq.direct, routing_key: sojourn.nowhere}
  - {name: mixed, rate: 250, confirms: true, mandatory: true, priority: {1: 0.7, 5: 0.3}}
consumers:
  - {name: c, prefetch: 100}
"""
run_in_batch(__name__, "publisher-outcomes", SCENARIO)


def test_unroutable_mandatory_publishes_are_returned_and_priorities_follow_their_mix(batch):
    ran = batch["publisher-outcomes"]
    run_dir = ran.run_dir
    assert ran.returncode == 0, ran.stderr[-3000:]
    publishes = read_rows(run_dir, "publish")
    lost = [p for p in publishes if p["producer_group"] == "lost"]
    mixed = [p for p in publishes if p["producer_group"] == "mixed"]
    assert len(lost) > 50 and {p["outcome"] for p in lost} == {"returned"}
    returned = {e["name"] for e in read_rows(run_dir, "event") if e["kind"] == "publish_returned"}
    assert returned == {p["message_id"] for p in lost}
    # routable mandatory publishes are confirmed as usual, and delivered
    assert {p["outcome"] for p in mixed} == {"confirmed"}
    assert {d["message_id"] for d in read_rows(run_dir, "delivery")} == {p["message_id"] for p in mixed}
    # about 750 draws: the share of priority 5 is 0.3 +- 0.07 (over 4 standard deviations)
    assert {p["priority"] for p in mixed} == {1, 5}
    share = sum(p["priority"] == 5 for p in mixed) / len(mixed)
    assert abs(share - 0.3) < 0.07, share
    assert all(p["priority"] is None for p in lost)
