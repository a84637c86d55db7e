"""Locust's web UI on the locustfile, used as a person would in headless Chromium: the start form
shows the scenario, its phases and the run directory and no fields the scenario decides; Start
runs it; when the scenario's shape ends the run is finished while Locust goes on running
(converted traces, Locust's report, run.json's end, the `sojourn analyze` command on the page
and the terminal), and quitting Locust later changes none of it.

Skipped (with the reason) only where Chromium is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.browser import chromium_path
from tests.integration.conftest import REPO, free_port, write_scenario
from tests.integration.traces import published_on_schedule, read_rows

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        chromium_path() is None,
        reason="headless Chromium not found (apt-get install chromium, or scripts/setup.sh --install-broker)",
    ),
]

DURATION_S, DRAIN_TIMEOUT_S, RATE = 3, 10, 30
QUIT_AFTER_S = 6.0  # Locust keeps running this long after the run: none of it may count as the run

SCENARIO = f"""
name: it-web-ui
description: the web UI's own test scenario
queue:
  name: sojourn.it.web-ui
  purge_on_start: true
  delete_on_end: true
run:
  duration_s: {DURATION_S}
  warmup_s: 1
  drain_timeout_s: {DRAIN_TIMEOUT_S}
producers:
  - name: p
    rate: {RATE}
    arrival: constant
consumers:
  - name: c
    prefetch: 10
    processing_ms: 1
timeline:
  - name: busy
    start_s: 1
    end_s: 2
    set:
      consumers.c.processing_ms: 2
"""

START_BUTTON = "[...document.querySelectorAll('button')].find(b => b.textContent.trim() === 'Start')"


def _wait_for_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"locust exited ({proc.returncode}): {log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"the web UI did not answer at {url}: {log.read_text()[-3000:]}")


def _wait_for_end(run_dir: Path, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    """Until the terminal says where the finished run is (its traces converted by then)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"locust exited ({proc.returncode}): {log.read_text()[-3000:]}"
        if "analyze it with:" in log.read_text():
            return
        time.sleep(0.5)
    pytest.fail(f"the run did not end: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def web_ui(tmp_path_factory):
    """Locust's web UI on the scenario, stdout and stderr in a log file; SIGINT (Ctrl-C) at the end."""
    tmp = tmp_path_factory.mktemp("web-ui")
    run_dir = tmp / "run"
    port = free_port()
    log = tmp / "locust.out"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", "loadgen/locustfile.py", "--scenario"]
            + [write_scenario(tmp / "s.yaml", SCENARIO), "--run-dir", str(run_dir)]
            + ["--web-host", "127.0.0.1", "--web-port", str(port)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_for_http(url, proc, log)
        yield {"url": url, "proc": proc, "log": log, "run_dir": run_dir, "tmp": tmp}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def browser():
    from tests.integration.cdp import Browser

    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def start_form(web_ui, browser):
    """What the start page shows once Locust's app has drawn it: its text, and a screenshot."""
    browser.open(web_ui["url"])
    browser.wait_for(f"!!{START_BUTTON}", timeout_s=30)
    text = browser.evaluate("document.body.innerText")
    screenshot = browser.screenshot(web_ui["tmp"] / "start-form.png")
    return text, screenshot


def test_the_start_form_has_no_field_the_scenario_decides(start_form, browser):
    text, _ = start_form
    assert browser.evaluate("document.querySelectorAll('input[name=userCount], input[name=spawnRate]').length") == 0
    assert "Number of users" not in text and "Ramp up" not in text
    assert "no host attribute" not in text


def test_the_page_shows_the_scenario_its_phases_and_the_run_directory(start_form, web_ui):
    text, screenshot = start_form
    assert "sojourn scenario it-web-ui" in text
    assert "busy 1–2 s: consumers.c.processing_ms" in text
    assert str(web_ui["run_dir"].resolve()) in text
    data = Path(screenshot).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.fixture(scope="module")
def finished(start_form, web_ui, browser):
    """Start pressed on the page; the run over; Locust still running (with the page's view of it)."""
    browser.evaluate(f"{START_BUTTON}.click()")
    browser.wait_for("/statistics/i.test(document.body.innerText)", timeout_s=20)  # the running view
    _wait_for_end(web_ui["run_dir"], web_ui["proc"], web_ui["log"])
    note = browser.wait_for(
        "(document.getElementById('sojourn-next') || {}).textContent.includes('sojourn analyze') && "
        "document.getElementById('sojourn-next').textContent",
        timeout_s=10,
    )
    browser.wait_for("/\\bSTOPPED\\b/i.test(document.body.innerText)", timeout_s=10)  # Locust's own status
    browser.screenshot(web_ui["tmp"] / "after-the-run.png")  # for a person to look at
    assert web_ui["proc"].poll() is None  # Locust is still running
    run = json.loads((web_ui["run_dir"] / "run.json").read_text())
    return run, note


def test_start_runs_the_scenario_and_its_end_is_stamped_when_the_shape_ends(finished):
    run, _ = finished
    assert run["status"] == "completed"
    ran_s = (run["ended_ns"] - run["t0_ns"]) / 1e9
    assert DURATION_S <= ran_s <= DURATION_S + DRAIN_TIMEOUT_S + 1.5, ran_s


def test_the_traces_are_converted_while_locust_runs_on(finished, web_ui):
    run_dir = web_ui["run_dir"]
    assert [p.name for p in (run_dir / "traces").rglob("*.raw")] == []
    published_on_schedule(read_rows(run_dir, "publish"), RATE, DURATION_S)
    assert "publish:(default):sojourn.it.web-ui" in (run_dir / "locust.html").read_text(encoding="utf-8")
    assert "consume:sojourn.it.web-ui" in (run_dir / "locust_stats.csv").read_text(encoding="utf-8")


def test_the_page_and_the_terminal_give_the_analyze_command(finished, web_ui):
    _, note = finished
    command = f"sojourn analyze {web_ui['run_dir'].resolve()}"
    assert command in note
    assert f"[sojourn] analyze it with: {command}" in web_ui["log"].read_text()


@pytest.fixture(scope="module")
def quit_later(finished, web_ui):
    """Ctrl-C QUIT_AFTER_S after the run: Locust exits."""
    time.sleep(QUIT_AFTER_S)
    proc = web_ui["proc"]
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(60)
    return finished[0]


def test_quitting_later_does_not_stretch_the_run(quit_later, web_ui):
    before = quit_later
    run = json.loads((web_ui["run_dir"] / "run.json").read_text())
    assert run["ended_ns"] == before["ended_ns"] and run["status"] == "completed"
    last_event_ns = max(e["ts_ns"] for e in read_rows(web_ui["run_dir"], "event"))
    assert last_event_ns - run["ended_ns"] < QUIT_AFTER_S / 2 * 1e9  # not when Locust quit


def test_the_last_lines_after_quitting_name_the_run_and_the_command(quit_later, web_ui):
    lines = [line for line in web_ui["log"].read_text().splitlines() if line.strip()]
    assert lines[-1] == f"[sojourn] analyze it with: sojourn analyze {web_ui['run_dir'].resolve()}", lines[-5:]
