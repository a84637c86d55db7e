"""`sojourn nightly` end to end: two tiny scenarios through Locust and Spark, one SLO failing on purpose."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from loadgen.suite import ResultsLock
from tests.integration.conftest import run_end_to_end, sojourn, write_scenario

TINY = """
name: {name}
broker:
  url: amqp://guest:guest@127.0.0.1:5672/
queue:
  name: sojourn.it.nightly.{name}
  purge_on_start: true
run:
  duration_s: 2     # enough: the checks are on verdicts, JUnit, history and pages (~50 acks/s vs "> 10")
  warmup_s: 1
  drain_timeout_s: 10
producers:
  - name: p
    rate: 50
    size_bytes: 100
consumers:
  - name: c
    prefetch: 10
    processing_ms: 1
"""

SUITE = """
name: it
keep_runs: 10
slo:
  - "messages.unaccounted == 0"
scenarios:
  - scenario: a.yaml
    slo: ["throughput.ack_per_s > 10"]
  - scenario: b.yaml
    slo: ["throughput.ack_per_s > 100000"]   # fails on purpose: ~50/s are sent
"""


# `sojourn nightly SUITE --out RESULTS`, started together with the other end-to-end command
run_end_to_end(
    __name__,
    "nightly",
    "nightly",
    SUITE,
    files={"a.yaml": TINY.format(name="it-night-a"), "b.yaml": TINY.format(name="it-night-b")},
)


def test_a_suite_with_a_failing_slo_exits_1_and_names_it_in_junit(end_to_end, tmp_path: Path):
    result = end_to_end["nightly"]
    out = result.run_dir
    assert result.returncode == 1, result.stderr[-3000:]
    assert "FAIL it.b slo: throughput.ack_per_s > 100000" in result.stdout
    # each entry's verdict is printed when it finishes, before the night's summary
    assert "nightly it: a: PASS, all " in result.stdout
    b_verdict = result.stdout.index("nightly it: b: FAIL, 1 of ")
    assert result.stdout.index("  FAIL SLO throughput.ack_per_s = ", b_verdict) < result.stdout.index(
        "nightly it: 2 scenarios"
    )
    assert ", bound > 100000\n" in result.stdout[b_verdict:]

    root = ET.parse(out / "junit.xml").getroot()
    failures = {
        f"{tc.get('classname')} {tc.get('name')}": tc.find("failure").get("message")
        for tc in root.iter("testcase")
        if tc.find("failure") is not None
    }
    assert list(failures) == ["it.b slo: throughput.ack_per_s > 100000"]
    assert failures["it.b slo: throughput.ack_per_s > 100000"].startswith(
        "throughput.ack_per_s > 100000 failed: measured "
    )
    names = {f"{tc.get('classname')} {tc.get('name')}" for tc in root.iter("testcase")}
    assert {"it.a run", "it.b run", "it.a slo: messages.unaccounted == 0"} <= names

    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert [r.split("-", 1)[1] for r in runs] == ["a", "b"]
    assert all((out / "runs" / r / "report.html").is_file() for r in runs)
    history = json.loads((out / "history.json").read_text())
    assert [(r["scenario"], r["verdict"]) for r in history["runs"]] == [("a", "pass"), ("b", "fail")]
    assert "Plotly.newPlot(" in (out / "index.html").read_text()

    compare = tmp_path / "cmp.html"
    done = sojourn("compare", *(str(out / "runs" / r) for r in runs), "--out", str(compare))
    assert done.returncode == 0, done.stderr
    assert compare.read_text().count("Plotly.newPlot(") == 2
    assert "<td><code>queue.name</code></td><td>sojourn.it.nightly.it-night-a</td>" in compare.read_text()


def test_a_second_nightly_on_a_held_results_directory_exits_2_naming_the_holder(tmp_path: Path):
    write_scenario(tmp_path / "a.yaml", TINY.format(name="it-night-a"))
    suite = write_scenario(tmp_path / "suite.yaml", "name: it\nscenarios:\n  - scenario: a.yaml\n")
    with ResultsLock(str(tmp_path / "results")):
        result = sojourn("nightly", suite, "--out", str(tmp_path / "results"))
    assert result.returncode == 2
    assert f"held by pid {os.getpid()}" in result.stderr
    assert not (tmp_path / "results" / "runs").exists()
