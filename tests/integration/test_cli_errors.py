"""What a user sees when the input is wrong or the broker is away; what Ctrl-C keeps."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.integration.conftest import run_in_batch, sojourn, wait_for_t0, write_scenario
from tests.integration.traces import read_rows


def test_unknown_key_exits_2_naming_file_path_and_close_match(tmp_path: Path):
    scenario = write_scenario(
        tmp_path / "x.yaml",
        """
name: bad
queue: {name: q}
run: {duration_s: 5}
consumers:
  - name: c
    prefech: 3
""",
    )
    result = sojourn("run", scenario)
    assert result.returncode == 2
    assert f"{scenario}: consumers[0].prefech: unknown key (did you mean 'prefetch'?)" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_override_exits_2(tmp_path: Path):
    result = sojourn("validate", "scenarios/quickstart.yaml", "--set", "consumers.main.prefetch=-1")
    assert result.returncode == 2
    assert "prefetch" in result.stderr and "-1" in result.stderr


def test_unreachable_broker_exits_3_with_masked_url_and_advice():
    result = sojourn("run", "scenarios/quickstart.yaml", env={"SOJOURN_AMQP_URL": "amqp://guest:s3cret@127.0.0.1:1/"})
    assert result.returncode == 3
    assert "amqp://guest:****@127.0.0.1:1/" in result.stderr
    assert "s3cret" not in result.stderr
    assert "rabbitmq-server" in result.stderr
    assert "sojourn broker up --port 5672" in result.stderr  # sojourn's own node, as well as the system's


def test_a_wrong_password_is_a_refusal_with_its_own_advice_not_an_unreachable_broker():
    result = sojourn("run", "scenarios/quickstart.yaml", env={"SOJOURN_AMQP_URL": "amqp://guest:wrong@127.0.0.1:5672/"})
    assert result.returncode == 3
    assert "the broker at amqp://guest:****@127.0.0.1:5672/ refused the connection: authentication refused" in (
        result.stderr
    )
    assert "refused the user or the password" in result.stderr
    assert "cannot reach" not in result.stderr and "rabbitmq-server -detached" not in result.stderr
    assert "wrong" not in result.stderr


def test_a_missing_virtual_host_is_a_refusal_naming_the_virtual_host():
    result = sojourn(
        "run", "scenarios/quickstart.yaml", env={"SOJOURN_AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/nope"}
    )
    assert result.returncode == 3
    assert "refused the connection: access refused (check the virtual host" in result.stderr
    assert "rabbitmqctl list_vhosts" in result.stderr and "rabbitmq-server -detached" not in result.stderr


def _interrupt_after_5_s_of_load(proc, run_dir):
    time.sleep(max(0.0, wait_for_t0(proc, run_dir) + 5 - time.time()))
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group


run_in_batch(
    __name__,
    "ctrl-c",
    """
name: it-interrupt
queue: {name: sojourn.it.interrupt, purge_on_start: true}
run: {duration_s: 60, drain_timeout_s: 5}
producers: [{name: p, rate: 100}]
consumers: [{name: c, prefetch: 50, processing_ms: 15}]
""",
    during=_interrupt_after_5_s_of_load,
)


def test_ctrl_c_keeps_traces_and_accounts_for_every_message(batch):
    ran = batch["ctrl-c"]
    run_dir = ran.run_dir
    assert ran.returncode == 130, ran.stderr[-3000:]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    publishes = read_rows(run_dir, "publish")
    deliveries = read_rows(run_dir, "delivery")
    leftovers = read_rows(run_dir, "leftover")
    assert len(publishes) > 300  # ~100/s for several seconds
    # 100/s in, at most ~66/s out: a backlog built up, so some were still in the broker
    acked = {d["message_id"] for d in deliveries if d["outcome"] == "ack"}
    left = {r["message_id"] for r in leftovers}
    published = {p["message_id"] for p in publishes if p["outcome"] != "failed"}
    assert left, "the census should have found the backlog"
    assert published <= acked | left, sorted(published - acked - left)[:5]
