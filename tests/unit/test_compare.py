"""`sojourn compare`: deltas against the first run, and one self-contained page."""

from __future__ import annotations

import json
import re

import pytest
from plotly.offline import get_plotlyjs

from analysis.report.compare import compare_rows, render_compare
from loadgen.cli import main


def summary(ack: float, p99: float, counts: list[int]) -> dict:
    return {
        "run": {"run_id": "r", "scenario": "s", "t0_ns": 1_763_733_600_000_000_000},
        "throughput": {"ack_per_s": ack},
        "sojourn_ms": {"p50": 1.0, "p99": p99},
        "latency_ms": {"end_to_end": {"p99": None}},
        "messages": {"discarded_total": 0, "unaccounted": 0},
        "windows": [{"t_s": t, "acked": int(ack)} for t in range(3)],
        "sojourn_histogram": {"edges_ms": [0.0, 1.0, 2.0, 4.0], "counts": counts},
    }


A, B = summary(200.0, 10.0, [5, 3, 2]), summary(150.0, 25.0, [1, 1, 8])


def row(rows: list[dict], key: str) -> list[dict]:
    return next(r for r in rows if r["key"] == key)["runs"]


def test_deltas_are_against_the_first_run_and_judged_in_each_metrics_direction():
    rows = compare_rows([("prefetch-1", A), ("prefetch-51", B)])
    first, second = row(rows, "throughput.ack_per_s")
    assert first["delta"] == 0 and first["better"] is None
    assert second["delta"] == -50.0 and second["relative"] == pytest.approx(-0.25) and second["better"] is False
    _, p99 = row(rows, "sojourn_ms.p99")
    assert p99["delta"] == 15.0 and p99["relative"] == pytest.approx(1.5) and p99["better"] is False
    _, e2e = row(rows, "latency_ms.end_to_end.p99")
    assert e2e["value"] is None and e2e["delta"] is None


def test_a_lower_sojourn_is_better():
    _, p99 = row(compare_rows([("b", B), ("a", A)]), "sojourn_ms.p99")
    assert p99["delta"] == -15.0 and p99["better"] is True


def test_the_page_is_self_contained_with_plotly_inlined_once():
    html = render_compare([("a", A), ("b", B)])
    assert 'src="http' not in html and "<link" not in html and "@import" not in html
    assert html.count(get_plotlyjs()) == 1 and html.count("Plotly.newPlot(") == 2
    assert "−" not in html and "(-50, -25.0%)" in html


def test_the_compare_command_writes_the_page_from_run_directories(tmp_path, capsys):
    for name, s in (("one", A), ("two", B)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(s))
    out = tmp_path / "cmp.html"
    assert main(["compare", str(tmp_path / "one"), str(tmp_path / "two"), "--out", str(out)]) == 0
    html = out.read_text()
    assert re.search(r'<a href="one/report.html">', html)
    assert "(+15, +150.0%)" in html


def test_compare_of_an_unanalysed_run_exits_2(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    assert main(["compare", str(tmp_path / "raw"), "--out", str(tmp_path / "x.html")]) == 2
    assert "no summary.json; analyze it first" in capsys.readouterr().err
