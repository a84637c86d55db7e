"""Processing you asked for, or a clear flag (issue 19): a run on the real broker whose load
generator is made to compete for its own CPU in its second phase. The analysis reports the
drawn and the achieved processing time per consumer and phase, flags the stretched phase, puts it
in the report's verdict banner, and its model check uses the achieved time; the quiet phase is
not flagged.

The contention is the load generator's own: a `sitecustomize` module on the run's PYTHONPATH
starts a thread in the Locust process (the project's code is untouched) that, while a flag file
exists, spins on the CPU and so holds the interpreter lock: every wake of the consumer's sleep
then waits for the lock (about 5 ms, the interpreter's switch interval), more than the 4 ms
asked, so the consumer's calibrated sleep can not take it back. The test creates the flag at
t0 + 8 s. Expected values are computed here from the traces read with pyarrow.
"""

from __future__ import annotations

import os
import statistics
import textwrap
import time
from pathlib import Path

from analysis.summary.model import OVERSHOOT_LIMIT
from tests.integration.conftest import start_sojourn, wait_for_t0, write_scenario
from tests.integration.traces import read_rows

P_MS = 4.0
# msg/s: the consumer is busy under a tenth of the time at the 4 ms asked, and under half of it
# even where the hog stretches each message to 20 ms (as it did on a slow machine, where 50 msg/s
# left the contended phase 96 % busy and so, rightly, saturated): unsaturated in both phases.
RATE = 20
QUIET_S = 8.0
DURATION_S = 16

SCENARIO = f"""
name: it-processing-overshoot
queue: {{name: sojourn.it.processing-overshoot, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {DURATION_S}, warmup_s: 0, drain_timeout_s: 10}}
producers:
  - {{name: p, rate: {RATE}, arrival: constant, size_bytes: 64, confirms: true}}
consumers:
  - {{name: c, prefetch: 10, processing_ms: {P_MS:g}}}
timeline:
  - {{name: quiet, start_s: 0, end_s: {QUIET_S:g}}}
  - {{name: contended, start_s: {QUIET_S:g}, end_s: {DURATION_S}}}
"""

CPU_HOG = """
import _thread
import os
from time import perf_counter as _clock, sleep as _sleep  # bound before gevent patches time

try:
    with open("/proc/self/cmdline", "rb") as f:
        _argv = f.read().split(b"\\0")
except OSError:
    _argv = []
_flag = os.environ.get("SOJOURN_TEST_CPU_HOG_FLAG")


def _hog():
    while True:
        if os.path.exists(_flag):
            end = _clock() + 0.05
            while _clock() < end:
                pass
        else:
            _sleep(0.02)


if _flag and b"-m" in _argv and b"locust" in _argv:  # the load generator's interpreter alone
    _thread.start_new_thread(_hog, ())
"""


def _expected(deliveries: list[dict], phase: str) -> dict:
    """Drawn and achieved mean processing over the phase's deliveries that have both."""
    rows = [d for d in deliveries if d["phase"] == phase and d["processing_ms"] is not None and d["end_ns"]]
    drawn = statistics.fmean(d["processing_ms"] for d in rows)
    achieved = statistics.fmean((d["end_ns"] - d["start_ns"]) / 1e6 for d in rows)
    return {"count": len(rows), "drawn": drawn, "achieved": achieved, "overshoot": achieved / drawn - 1}


def _run_with_the_hog(base: Path) -> tuple[Path, dict, dict]:
    """One run with the hog turned on at t0 + QUIET_S: its directory, the quiet and contended phases."""
    site, flag, run_dir = base / "site", base / "contend", base / "run"
    site.mkdir(parents=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(CPU_HOG))
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p),
        "SOJOURN_TEST_CPU_HOG_FLAG": str(flag),
    }
    scenario = write_scenario(base / "s.yaml", SCENARIO)
    proc = start_sojourn("run", scenario, "--out", str(run_dir), "--no-analyze", env=env)
    try:
        t0 = wait_for_t0(proc, run_dir)
        time.sleep(max(0.0, t0 + QUIET_S - time.time()))
        flag.touch()
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    deliveries = read_rows(run_dir, "delivery")
    return run_dir, _expected(deliveries, "quiet"), _expected(deliveries, "contended")


def test_contention_in_the_load_generator_is_flagged_for_its_phase_and_the_model_uses_achieved_time(
    tmp_path: Path, analyze_in_process
):
    # The analysis flags a phase over OVERSHOOT_LIMIT (5 %); one stall of 36 ms in the quiet phase's
    # 160 sleeps does that on a busy host: the run is made once more, and a second quiet phase over it
    # fails the test (a load generator slow every time).
    run_dir, quiet, contended = _run_with_the_hog(tmp_path / "attempt1")
    if quiet["overshoot"] >= OVERSHOOT_LIMIT:
        print(f"attempt 1: the quiet phase ran {quiet['overshoot']:.1%} long (a busy host): once more")
        run_dir, quiet, contended = _run_with_the_hog(tmp_path / "attempt2")
    # What the hog is for: the contended phase's processing ran well over 5 % long, the quiet one's not.
    assert contended["overshoot"] > 0.25 and quiet["overshoot"] < OVERSHOOT_LIMIT, (quiet, contended)

    summary = analyze_in_process(run_dir)
    rows = {row["phase"]: row for row in summary["model"]["phases"] if row["group"] == "c"}
    for phase, expected, stretched in (("quiet", quiet, False), ("contended", contended, True)):
        row = rows[phase]
        processing = row["processing"]
        assert processing["count"] == expected["count"], (phase, processing, expected)
        assert abs(processing["drawn_ms"] - expected["drawn"]) < 1e-6, (phase, processing, expected)
        assert abs(processing["achieved_ms"] - expected["achieved"]) < 1e-6, (phase, processing, expected)
        assert abs(processing["overshoot"] - expected["overshoot"]) < 1e-9, (phase, processing, expected)
        assert processing["stretched"] is stretched, (phase, processing)
        # The model's p is the achieved time, not the 4 ms the scenario asked for.
        assert abs(row["processing_ms"] - expected["achieved"]) < 1e-6, (phase, row["processing_ms"], expected)
        # 20 msg/s into an empty queue, busy under half the time: no regime the saturated formula applies to.
        assert row["regime"] == "unsaturated", (phase, row["regime"], row["check"]["regime_why"])
        assert row["check"]["applies"] is False and row["check"]["predicted"] is None, (phase, row["check"])

    whole = next(row for row in summary["model"]["consumers"] if row["group"] == "c")
    assert whole["processing"]["stretched"] is True, whole["processing"]

    report = (run_dir / "report.html").read_text()
    assert "processing ran long" in report
    banner = report[report.index("processing ran long") :][:800]
    assert "(contended)" in banner and f"{100 * contended['overshoot']:.1f}" in banner, banner
