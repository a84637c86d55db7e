"""A stream on the real broker (queue.type: stream): `live` reads from the start (offset next) and
changes its prefetch at 3 s, which re-subscribes it; `audit` joins at 2 s and reads from the first
message. In the delivery traces, read with pyarrow, each group acked every confirmed message exactly
once (the re-subscription read on from where it was, not again), the offsets of each group run
0, 1, 2, ... without a gap; the summary counts every message acked, none not yet read and no
duplicate, and the report has the Stream section."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter

import pika
import pytest

from analysis.report import render_report
from loadgen.scenario.streams import consume_offset, stream_offset
from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

URL = os.environ.get("SOJOURN_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
QUEUE = f"sojourn.it.stream-{uuid.uuid4().hex[:8]}"  # a stream can not be purged: a new one each run

SCENARIO = f"""
name: it-stream
queue: {{name: {QUEUE}, type: stream, delete_on_end: true}}
run: {{duration_s: 5, drain_timeout_s: 30}}
producers:
  - {{name: p, rate: 100}}
consumers:
  - {{name: live, prefetch: 10, processing_ms: 2, offset: next}}
  - {{name: audit, count: 0, prefetch: 20, processing_ms: 1, offset: first}}
timeline:
  - {{name: audit-joins, start_s: 2, set: {{consumers.audit.count: 1}}}}
  - {{name: live-wider, start_s: 3, set: {{consumers.audit.count: 1, consumers.live.prefetch: 30}}}}
"""

run_in_batch(__name__, "stream", SCENARIO)

# A stream that existed before the run, holding 20 messages of an earlier run: kept, not refused
# (there is no purging a stream); a group reading from first reads them too, outside the accounting.
EXISTING = f"sojourn.it.stream-existing-{uuid.uuid4().hex[:8]}"
OLD_MESSAGES = 20


def _existing_stream() -> None:
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    ch.queue_declare(EXISTING, durable=True, arguments={"x-queue-type": "stream"})
    ch.confirm_delivery()
    for i in range(OLD_MESSAGES):
        ch.basic_publish("", EXISTING, b"old", pika.BasicProperties(headers={"sojourn-id": f"earlier-{i}"}))
    conn.close()


run_in_batch(
    __name__,
    "stream-existing",
    f"""
name: it-stream-existing
queue: {{name: {EXISTING}, type: stream, delete_on_end: true}}
run: {{duration_s: 3, drain_timeout_s: 30}}
producers:
  - {{name: p, rate: 50}}
consumers:
  - {{name: audit, prefetch: 20, offset: first}}
""",
    before=_existing_stream,
)


@pytest.fixture(scope="module")
def run(batch, analyze_in_process):
    ran = batch["stream"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran.run_dir, analyze_in_process(ran.run_dir)


def test_each_group_acked_every_confirmed_message_once_in_offset_order(run):
    run_dir, _ = run
    confirmed = {p["message_id"] for p in read_rows(run_dir, "publish") if p["outcome"] == "confirmed"}
    assert len(confirmed) >= 450  # 5 s at 100 msg/s
    deliveries = sorted(read_rows(run_dir, "delivery"), key=lambda d: d["receive_ns"])
    for group in ("live", "audit"):
        mine = [d for d in deliveries if d["consumer_group"] == group]
        acked = Counter(d["message_id"] for d in mine if d["outcome"] == "ack")
        assert set(acked) == confirmed, group
        assert set(acked.values()) == {1}, group  # none read twice, the re-subscription included
        offsets = [d["stream_offset"] for d in mine]
        assert offsets == list(range(len(confirmed))), group  # the whole stream, in order, no gap
    audit = [d for d in deliveries if d["consumer_group"] == "audit"]
    events = read_rows(run_dir, "event")
    (join,) = [e for e in events if e["kind"] == "consumer_join" and e["source"] == audit[0]["consumer"]]
    assert json.loads(join["detail"])["stream_offset"] == "first"
    # audit joined at 2 s and read what was published before it first: a backlog it caught up with
    first_publish = min(p["publish_ns"] for p in read_rows(run_dir, "publish"))
    assert audit[0]["receive_ns"] - first_publish > 1.5e9
    assert any(e["kind"] == "prefetch_change" for e in events)


def test_the_summary_counts_every_message_read_by_both_groups_and_the_report_shows_it(run):
    _, summary = run
    m = summary["messages"]
    assert m["unaccounted"] == 0 and m["not_yet_read"] == 0 and m["duplicates"] == 0
    assert m["acked"] == m["published"] == m["confirmed"]
    groups = {g["group"]: g for g in summary["stream"]["groups"]}
    assert groups["live"]["not_yet_read"] == groups["audit"]["not_yet_read"] == 0
    assert groups["live"]["acked"] == groups["audit"]["acked"] == m["published"]
    assert (groups["audit"]["offset"], groups["audit"]["first_offset"]) == ("first", 0)
    page = render_report(summary)
    assert 'id="stream"' in page and "every group read every message it reads" in page


def test_every_offset_form_a_scenario_takes_is_one_the_broker_takes_and_starts_where_the_docs_say():
    # Six messages at offsets 0-5; each `offset` as the loader checks it and the consumer sends it.
    queue = f"sojourn.it.stream-offsets-{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "stream"})
    try:
        for i in range(6):
            ch.basic_publish("", queue, f"m{i}".encode())
        ch.basic_qos(prefetch_count=10)

        def read_from(offset) -> list[int]:
            got: list[int] = []

            def on_message(channel, method, properties, _body) -> None:
                got.append(int(properties.headers["x-stream-offset"]))
                channel.basic_ack(method.delivery_tag)

            tag = ch.basic_consume(
                queue, on_message, arguments={"x-stream-offset": consume_offset(stream_offset(offset))}
            )
            deadline = time.monotonic() + 0.8
            while time.monotonic() < deadline:
                conn.process_data_events(0.1)
            ch.basic_cancel(tag)
            return got

        assert read_from("first") == [0, 1, 2, 3, 4, 5]
        assert read_from(4) == [4, 5]
        assert read_from("2020-01-01T00:00:00Z") == [0, 1, 2, 3, 4, 5]  # every chunk is newer
        assert read_from("2099-01-01T00:00:00+01:00") == []  # none is
        assert read_from("next") == []  # only what comes after: nothing
        last = read_from("last")
        assert last and last == list(range(last[0], 6))  # the last chunk, to the end
    finally:
        ch.queue_delete(queue)
        conn.close()


def test_a_stream_that_existed_is_kept_and_its_earlier_messages_stay_out_of_the_accounting(batch, analyze_in_process):
    ran = batch["stream-existing"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "existed before the run" in ran.stderr
    deliveries = read_rows(ran.run_dir, "delivery")
    earlier = [d for d in deliveries if (d["message_id"] or "").startswith("earlier-")]
    assert sorted(d["stream_offset"] for d in earlier) == list(range(OLD_MESSAGES))  # read first, from 0
    summary = analyze_in_process(ran.run_dir)
    m = summary["messages"]
    assert m["published"] >= 140 and m["acked"] == m["published"] and m["unaccounted"] == m["not_yet_read"] == 0
    (group,) = summary["stream"]["groups"]
    assert group["acked"] == m["published"] + OLD_MESSAGES and group["not_yet_read"] == 0
