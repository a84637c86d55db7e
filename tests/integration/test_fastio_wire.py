"""On the real broker: publishes through loadgen's tuned connection and FrameWriter
(loadgen.amqp.fastio) arrive whole, in order, with their properties, whatever their size,
including an empty body and one larger than a frame (pika's own path)."""

import json
import os
import subprocess
import sys
import uuid

import pika

from tests.integration.conftest import REPO

URL = os.environ.get("SOJOURN_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")

# Runs in its own gevent-patched process, as a Locust worker does; prints how many it published.
PUBLISHER = r"""
from gevent import monkey; monkey.patch_all()
import json, sys
import pika
from loadgen.amqp import connection as amqp, fastio
from loadgen.amqp.fastio import SojournProperties
url, queue, sizes = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
conn = amqp.connect(url, name="fastio-wire-test")
channel = amqp.open_channel(conn)
tuned = (type(conn._transport).__name__ == "_AsyncPlaintextTransport"
         and conn._transport._produce.__name__ == "produce_coalesced")
publisher = fastio.FrameWriter(channel)
for i, size in enumerate(sizes):
    body = bytes([i % 251]) * size
    if i % 2:
        props = SojournProperties(2, f"wire:{i}", 1_795_292_889_153_618_331 + i)
    else:
        props = pika.BasicProperties(delivery_mode=1, message_id=f"wire:{i}", priority=i % 10,
                                     headers={"sojourn-id": f"wire:{i}", "n": i})
    publisher.publish("", queue, body, props)
amqp.flush_writes(conn, 10)
conn.close()
print(json.dumps({"published": len(sizes), "tuned": tuned}))
"""


def test_what_the_broker_delivers_is_what_was_published():
    queue = f"sojourn.test.fastio.{uuid.uuid4().hex[:8]}"
    sizes = [100, 0, 1, 4096, 131_072 - 8, 131_072 - 7, 300_000] + [100] * 500 + [50_000] * 20
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    ch.queue_declare(queue, arguments={"x-max-priority": 10})
    try:
        out = subprocess.run(
            [sys.executable, "-c", PUBLISHER, URL, queue, json.dumps(sizes)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout.splitlines()[-1]) == {"published": len(sizes), "tuned": True}
        got = []
        for _ in range(len(sizes) + 1):
            method, props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                break
            got.append((props, body))
        assert len(got) == len(sizes)
        # One priority level per message would reorder them: read back by id instead of by position.
        by_id = {props.message_id: (props, body) for props, body in got}
        for i, size in enumerate(sizes):
            props, body = by_id[f"wire:{i}"]
            assert body == bytes([i % 251]) * size, f"message {i} ({size} bytes)"
            if i % 2:
                assert (props.delivery_mode, props.priority) == (2, None)
                assert props.headers == {"sojourn-id": f"wire:{i}", "sojourn-pub-ns": 1_795_292_889_153_618_331 + i}
            else:
                assert (props.delivery_mode, props.priority) == (1, i % 10)
                assert props.headers == {"sojourn-id": f"wire:{i}", "n": i}
    finally:
        ch.queue_delete(queue)
        conn.close()
