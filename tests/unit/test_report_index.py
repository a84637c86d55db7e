"""The nightly index.html says in visible text why a run did not pass (its status, each failed SLO,
each regression with its baseline), not only in a hover, and escapes what comes from user files."""

from __future__ import annotations

from html.parser import HTMLParser

from analysis.history import METRICS
from analysis.report.index import render_index

KEYS = [m.key for m in METRICS]


class Visible(HTMLParser):
    """The page's text as a reader sees it, one string per table row, and every title attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[str] = []
        self.titles: list[str] = []
        self._row: list[str] | None = None
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        self.titles += [v or "" for k, v in attrs if k == "title"]
        if tag in ("script", "style", "title"):
            self._hidden += 1
        elif tag == "tr":
            self._row = []

    def handle_endtag(self, tag):
        if tag in ("script", "style", "title"):
            self._hidden -= 1
        elif tag == "tr" and self._row is not None:
            self.rows.append(" ".join("".join(self._row).split()))
            self._row = None

    def handle_data(self, data):
        if not self._hidden and self._row is not None:
            self._row.append(data)


def run(t: int, *, verdict="pass", status="completed", failed_slo=(), p99=10.0, base=None, regressions=()) -> dict:
    metrics = dict.fromkeys(KEYS, 1.0) | {"sojourn_ms.p99": p99}
    return {
        "run_id": f"r{t}",
        "scenario": "quickstart",
        "t0_ns": t * 86_400 * 10**9,
        "run_dir": f"runs/r{t}",
        "status": status,
        "verdict": verdict,
        "failed_slo": list(failed_slo),
        "metrics": metrics,
        "baseline": dict.fromkeys(KEYS) | {"sojourn_ms.p99": base},
        "regressions": list(regressions),
    }


def history(*runs: dict) -> dict:
    metrics = [{"key": m.key, "label": m.label, "higher_is_better": m.higher_is_better} for m in METRICS]
    return {"window": 3, "tolerance": 0.2, "metrics": metrics, "runs": list(runs)}


def page(*runs: dict) -> Visible:
    parsed = Visible()
    parsed.feed(render_index(history(*runs)))
    return parsed


def row_after(rows: list[str], run_id_day: str) -> str:
    """The row right under the run's own row (runs are listed newest first)."""
    return rows[next(i for i, r in enumerate(rows) if r.startswith(run_id_day)) + 1]


def test_a_failed_slo_is_visible_text_with_its_measured_value_not_a_hover():
    parsed = page(run(1), run(2, verdict="fail", failed_slo=["sojourn_ms.p99 < 5"], p99=12.5))
    reason = row_after(parsed.rows, "1970-01-03")
    assert reason == "SLO failed: sojourn_ms.p99 < 5 (measured 12.5)"
    assert not any("sojourn_ms.p99 < 5" in t for t in parsed.titles)


def test_a_regression_shows_its_value_and_baseline_as_text():
    parsed = page(run(1, p99=10.0), run(2, p99=30.0, base=10.0, regressions=["sojourn_ms.p99"]))
    # 30 against a baseline of 10 is +200 %; more sojourn is worse
    assert row_after(parsed.rows, "1970-01-03") == (
        "regression: sojourn_ms.p99 30 vs baseline 10 (higher is worse, +200%)"
    )


def test_a_run_that_did_not_complete_says_its_status_escaped():
    parsed = page(run(1, verdict="error", status="<b>crashed</b>"))
    assert row_after(parsed.rows, "1970-01-02") == "run did not complete: status '<b>crashed</b>'"
    assert "<b>crashed" not in render_index(history(run(1, verdict="error", status="<b>crashed</b>")))


def test_a_run_that_passed_has_no_reason_line():
    parsed = page(run(1), run(2))
    assert len(parsed.rows) == 3  # the header and one row per run
