"""A locustfile of listeners only, loaded beside sojourn's (`-f loadgen/locustfile.py,THIS`), as a
plugin's would be: it counts Locust's `request` events by type, successes and failures apart, and
writes the counts to RUN_DIR/request_counts.json when Locust quits (tests/integration/test_listeners.py)."""

import json
import os
from collections import Counter

from locust import events

_COUNTS: Counter = Counter()


@events.request.add_listener
def _count(request_type, exception=None, **_kwargs):
    _COUNTS[f"{request_type}:{'failure' if exception is not None else 'success'}"] += 1


@events.quitting.add_listener
def _write(environment, **_kwargs):
    run_dir = getattr(environment.parsed_options, "run_dir", "")
    if run_dir and os.path.isdir(run_dir):
        with open(os.path.join(run_dir, "request_counts.json"), "w") as f:
            json.dump(dict(_COUNTS), f)
