"""A Locust user whose run is over in its process waits between calls instead of spinning: Locust
(wait_time 0) calls its task straight back until the master stops the test, and each call went
through the participant's start again at once (loadgen/locustfile.py, SojournUser.run_participant).
Run in a child process: importing the locustfile defines the scenario's User classes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, time
from gevent.event import Event
from loadgen import locustfile
from loadgen.run import locust_session

class Ctx:
    def __init__(self):
        self.stopping, self.started = Event(), Event()
        self.participants = []
        self.touched = 0
    def claim_slot(self, *args):
        self.touched += 1
        return 0
    def ready_to_start(self, participant):
        self.touched += 1
        return False
    def participant_finished(self, participant):
        self.touched += 1

ctx = Ctx()
ctx.stopping.set()  # the run is over here: _report_finished closed the context
locust_session.context = lambda: ctx

class User:
    participant = None
    kind, group = "consumers", "c"
    environment = None

began = time.monotonic()
calls = 0
while time.monotonic() - began < 0.5:  # Locust's loop with wait_time 0, for half a second
    locustfile.SojournUser.run_participant(User())
    calls += 1
print(json.dumps({"calls": calls, "touched": ctx.touched, "idle_s": locustfile.FINISHED_IDLE_S}))
"""


def test_a_finished_user_waits_between_calls_instead_of_spinning(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: finished\nqueue: {name: unit.finished}\nrun: {duration_s: 1}\n"
        "producers: [{name: p, rate: 1}]\nconsumers: [{name: c}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "SOJOURN_SCENARIO": str(scenario), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    # each call waits FINISHED_IDLE_S (1 s): one call in half a second, not thousands, and none
    # goes through the participant's start (slot claim, start barrier, finish) again
    assert got["idle_s"] >= 0.5
    assert got["calls"] == 1 and got["touched"] == 0
