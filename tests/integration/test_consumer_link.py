"""The checks of tests/consumer_checks.py (a buffer processed in order and acked, a prefetch change
per scope, a crash that settles nothing and leaves the broker holding it, a channel the broker
closes with a 406, a basic.cancel from the broker as the queue is deleted) and of
tests/producer_checks.py (the confirm window, a channel the broker closes on a publish to an
exchange that is gone) on pika's adapters against the broker, as
tests/unit/test_consumer.py and test_producer.py run them on the in-memory links: the seam's
production implementations behave as the fakes the unit tests trust. They run in a
gevent-patched child process, as in a load generator."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.conftest import REPO


def test_the_consumer_checks_pass_on_pikas_link_against_the_broker(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.consumer_link_child",
            "amqp://guest:guest@127.0.0.1:5672/%2F",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert done.stdout.split("\n")[:8] == [
        "ok confirm-window",
        "ok buffered",
        "ok prefetch-consumer",
        "ok prefetch-channel",
        "ok crash",
        "ok producer-channel-closed",
        "ok consumer-channel-closed",
        "ok consumer-cancelled",
    ]
