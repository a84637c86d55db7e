"""A real queue left as it was found (issue 48), on the real broker: another client's 50 messages in
a queue the run did not create are not purged without `queue.purge_on_start: true` (the run is
refused, exit 2, naming the queue and the count, and the 50 are still there); with it they are
purged and the run says so, and `delete_on_end` still leaves the queue, which the run did not
create. The queue's name carries a per-session suffix; the test deletes it, as it created it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pika

from tests.integration.conftest import sojourn, write_scenario
from tests.integration.traces import read_rows

QUEUE = f"sojourn.it.real-queue.{uuid.uuid4().hex[:8]}"
THEIRS = 50


def _connection():
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))


def _ready() -> int | None:
    """Messages ready in QUEUE, None when it does not exist (a passive declare on a channel of its own)."""
    connection = _connection()
    try:
        return connection.channel().queue_declare(QUEUE, passive=True).method.message_count
    except pika.exceptions.ChannelClosedByBroker as exc:
        assert exc.reply_code == 404, exc
        return None
    finally:
        if connection.is_open:
            connection.close()


def _scenario(tmp_path: Path, name: str, purge: str) -> str:
    return write_scenario(
        tmp_path / f"{name}.yaml",
        f"""
name: it-queue-safety-{name}
queue: {{name: {QUEUE}, {purge}delete_on_end: true}}
run: {{duration_s: 1, drain_timeout_s: 10}}
producers: [{{name: p, rate: 20}}]
consumers: [{{name: c, prefetch: 10}}]
""",
    )


def test_another_clients_messages_are_purged_only_when_the_scenario_says_so(tmp_path: Path):
    connection = _connection()
    channel = connection.channel()
    channel.queue_declare(QUEUE)
    channel.confirm_delivery()  # each publish returns once the broker has the message
    for i in range(THEIRS):
        channel.basic_publish("", QUEUE, f"theirs {i}".encode())
    connection.close()
    try:
        assert _ready() == THEIRS

        refused = sojourn("run", _scenario(tmp_path, "default", ""), "--out", str(tmp_path / "refused"), "--no-analyze")
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert f"queue '{QUEUE}' already holds {THEIRS} messages and was not created by this run" in refused.stderr
        assert "queue.purge_on_start: true to purge them" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert _ready() == THEIRS  # not purged, not consumed, not counted by a census
        assert read_rows(tmp_path / "refused", "delivery") == []
        run = json.loads((tmp_path / "refused" / "run.json").read_text())
        assert run["status"] == "failed" and QUEUE in run["error"]

        purged = sojourn(
            "run",
            _scenario(tmp_path, "purge", "purge_on_start: true, "),
            "--out",
            str(tmp_path / "purged"),
            "--no-analyze",
            timeout=120,
        )
        assert purged.returncode == 0, purged.stderr[-3000:]
        assert (
            f"queue '{QUEUE}': purged {THEIRS} messages it held before the run (queue.purge_on_start: true)"
            in purged.stderr
        )
        events = read_rows(tmp_path / "purged", "event")
        assert next(e["value"] for e in events if e["kind"] == "broker_depth" and e["name"] == QUEUE) == THEIRS
        deliveries = read_rows(tmp_path / "purged", "delivery")
        assert deliveries and all(d["message_id"] is not None for d in deliveries)  # none of theirs reached a consumer
        # delete_on_end: true, but the queue existed before the run: it is left in place.
        assert _ready() == 0
        assert "existed before this run, so it is not deleted" in purged.stderr
    finally:
        connection = _connection()
        connection.channel().queue_delete(QUEUE)
        connection.close()
