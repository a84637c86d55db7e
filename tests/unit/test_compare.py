"""`sojourn compare`: deltas against the first run, the settings that differ between the runs,
labels that tell runs of one scenario apart, and one self-contained page."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs

from analysis.report.compare import compare_rows, render_compare
from analysis.settings_diff import Missing, differing_settings, distinct_labels, format_setting
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


# --- the settings that differ between runs (run.json's resolved scenario) ---

QUICKSTART_RUN = json.loads((Path(__file__).resolve().parents[1] / "data/runs/quickstart/run.json").read_text())


class Tables(HTMLParser):
    """Each table of the page as rows of visible cell texts (header row included)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "title"):
            self._hidden += 1
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("script", "style", "title"):
            self._hidden -= 1
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._hidden:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Tables:
    parsed = Tables()
    parsed.feed(html)
    return parsed


def table_starting(parsed: Tables, first_header: str) -> list[list[str]]:
    return next(t for t in parsed.tables if t and t[0] and t[0][0] == first_header)


def run_dir(tmp_path: Path, name: str, *, prefetch: int = 20, url: str | None = None, summary_of: dict = A) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({**summary_of, "run": {**summary_of["run"], "scenario": "quickstart"}}))
    run = copy.deepcopy(QUICKSTART_RUN)
    run["scenario"]["consumers"][0]["prefetch"] = prefetch
    if url is not None:
        run["scenario"]["broker"]["url"] = url
    (d / "run.json").write_text(json.dumps(run))
    return d


def compare_page(tmp_path: Path, *dirs: Path) -> str:
    out = tmp_path / "cmp.html"
    assert main(["compare", *map(str, dirs), "--out", str(out)]) == 0
    return out.read_text()


def test_runs_of_one_scenario_differing_in_prefetch_show_that_setting_and_labels_that_differ(tmp_path):
    html = compare_page(tmp_path, run_dir(tmp_path, "a", prefetch=10), run_dir(tmp_path, "b", prefetch=50))
    parsed = parse(html)
    settings = table_starting(parsed, "setting")
    labels = settings[0][1:]
    assert labels == ["quickstart (consumers.main.prefetch=10)", "quickstart (consumers.main.prefetch=50)"]
    assert settings[1:] == [["consumers.main.prefetch", "10", "50"]]  # identical paths (ack_mode, rate...) absent
    metrics = table_starting(parsed, "metric")
    assert metrics[0][1:] == labels  # the metric columns carry the same labels
    runs = table_starting(parsed, "run")
    assert [r[2] for r in runs[1:]] == [str(tmp_path / "a"), str(tmp_path / "b")]  # and each run directory


def test_runs_with_identical_settings_say_so_and_are_told_apart_by_directory(tmp_path):
    html = compare_page(tmp_path, run_dir(tmp_path, "mon"), run_dir(tmp_path, "tue", summary_of=B))
    parsed = parse(html)
    assert "Settings identical" in "".join(parsed.text)
    assert not any(t[0][0] == "setting" for t in parsed.tables)
    assert table_starting(parsed, "metric")[0][1:] == ["quickstart · mon", "quickstart · tue"]


def test_a_password_in_a_differing_broker_url_is_masked(tmp_path):
    html = compare_page(
        tmp_path,
        run_dir(tmp_path, "a", url="amqp://bob:s3cret@10.0.0.1:5672/"),
        run_dir(tmp_path, "b", url="amqp://bob:s3cret@10.0.0.2:5672/"),
    )
    assert "s3cret" not in html
    rows = table_starting(parse(html), "setting")[1:]
    assert ["broker.url", "amqp://bob:****@10.0.0.1:5672/", "amqp://bob:****@10.0.0.2:5672/"] in rows


def test_a_run_without_run_json_is_compared_on_its_metrics_and_named_as_unknown(tmp_path):
    known = run_dir(tmp_path, "a")
    bare = tmp_path / "old"
    bare.mkdir()
    (bare / "summary.json").write_text(json.dumps(B))
    parsed = parse(compare_page(tmp_path, known, bare))
    text = " ".join("".join(parsed.text).split())
    assert "No run.json, settings not known: s" in text  # B's scenario is named "s"
    assert "Settings not compared: fewer than two runs have a run.json." in text


def test_settings_are_keyed_by_group_name_and_compared_as_values():
    a = {"run": {"duration_s": 40}, "consumers": [{"name": "main", "prefetch": 1}], "codel": None, "on": True}
    b = {
        "run": {"duration_s": 40.0},
        "consumers": [{"name": "main", "prefetch": 5}],
        "codel": {"target_ms": 5},
        "on": 1,
    }
    got = {d.path: d.values for d in differing_settings([a, b])}
    assert got == {
        "consumers.main.prefetch": (1, 5),
        "codel": (None, Missing.NOT_SET),
        "codel.target_ms": (Missing.NOT_SET, 5),
        "on": (True, 1),  # a flag is not a number; 40 and 40.0 are one duration
    }
    assert [format_setting(v) for v in got["codel"]] == ["null", "–"]


def test_labels_add_the_differing_settings_only_where_scenario_names_repeat():
    one = {"name": "q", "consumers": [{"name": "main", "prefetch": 1}], "run": {"duration_s": 30}}
    five = {"name": "q", "consumers": [{"name": "main", "prefetch": 5}], "run": {"duration_s": 60}}
    labels = distinct_labels(["q", "q", "other"], [one, five, None], ["r/1", "r/2", "r/3"], most=1)
    assert labels == ["q (consumers.main.prefetch=1, …)", "q (consumers.main.prefetch=5, …)", "other"]


def test_a_run_json_that_does_not_parse_exits_2_naming_the_file(tmp_path, capsys):
    bad = run_dir(tmp_path, "bad")
    (bad / "run.json").write_text("{not json")
    assert main(["compare", str(run_dir(tmp_path, "ok")), str(bad), "--out", str(tmp_path / "x.html")]) == 2
    assert f"{bad / 'run.json'}: can not read" in capsys.readouterr().err
