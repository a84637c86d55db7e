"""The run report in a real browser: a tiny real run, its report.html opened in headless Chromium.

Checks that every plotly chart rendered (SVG present), that no script error reached the
console, that the navigation links every section shown, that the Locust report is linked,
and leaves a screenshot in the test's tmp dir.
Skipped (with the reason) only where Chromium is not installed; nothing is installed at
run time (`scripts/setup.sh --install-broker` installs Debian's chromium).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.browser import chromium_path, render_in_chromium
from tests.integration.cdp import Browser
from tests.integration.conftest import sojourn, write_scenario

pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason="headless Chromium not found (apt-get install chromium, or scripts/setup.sh --install-broker)",
)

TINY = """
name: it-browser
broker:
  url: amqp://guest:guest@127.0.0.1:5672/
queue:
  name: sojourn.it.browser
  purge_on_start: true
run:
  duration_s: 3
  warmup_s: 1
  drain_timeout_s: 10
producers:
  - name: p
    rate: 60
    arrival: poisson
    size_bytes: 100
consumers:
  - name: c
    prefetch: 10
    processing_ms: {distribution: exponential, mean_ms: 3}
timeline:
  - name: slower
    start_s: 2
    set:
      consumers.c.processing_ms: 6
"""

CHART_IDS = (
    "chart-throughput",
    "chart-sojourn",
    "chart-components",
    "chart-distribution",
    "chart-cdf",
    "chart-utilisation",
)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, analyze_in_process):
    tmp = tmp_path_factory.mktemp("browser")
    run_dir = tmp / "run"
    result = sojourn("run", write_scenario(tmp / "tiny.yaml", TINY), "--out", str(run_dir), "--no-analyze")
    assert result.returncode == 0, result.stderr[-3000:]
    analyze_in_process(run_dir)  # writes report.html as `sojourn run` would, on the suite's Spark session
    report = run_dir / "report.html"
    assert report.is_file()
    dom, errors, screenshot = render_in_chromium(report, tmp)
    return report, dom, errors, screenshot


def test_the_report_renders_without_console_errors(rendered):
    _, _, errors, _ = rendered
    assert errors == []


def test_every_chart_was_drawn_by_plotly(rendered):
    _, dom, _, _ = rendered
    for chart in CHART_IDS:
        match = re.search(rf'<div id="{chart}"[^>]*class="[^"]*js-plotly-plot', dom)
        assert match, f"{chart} was not turned into a plotly chart"
    assert dom.count('class="main-svg"') >= 2 * len(CHART_IDS)  # plotly draws two SVG layers per chart


def test_the_new_sections_show_measured_values(rendered):
    _, dom, _, _ = rendered
    model = re.search(r'<section id="model">(.*?)</section>', dom, re.DOTALL).group(1)
    assert "<table" in model  # a real run has at least one consumer with measured deliveries
    assert "CoDel interval" in model


def test_the_navigation_links_every_section_the_page_shows_and_nothing_else(rendered):
    _, dom, _, _ = rendered
    nav = re.search(r'<nav class="toc">(.*?)</nav>', dom, re.DOTALL).group(1)
    main = re.search(r"<main>(.*)</main>", dom, re.DOTALL).group(1)
    linked = re.findall(r'<a href="#([^"]+)"', nav)
    shown = re.findall(r'<section id="([^"]+)"', main)
    assert linked == shown, (
        f"linked, not shown: {set(linked) - set(shown)}; shown, not linked: {set(shown) - set(linked)}"
    )


def test_the_locust_report_is_linked(rendered):
    report, dom, _, _ = rendered
    if not (report.parent / "locust.html").is_file():
        pytest.skip("this run left no locust.html")
    assert 'href="locust.html"' in dom


def test_a_screenshot_is_saved(rendered):
    _, _, _, screenshot = rendered
    data = Path(screenshot).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000


# Per table: its section, whether its right edge lies within its container's visible box (and
# within the viewport, unless the page itself scrolls sideways), and whether the container scrolls
# sideways to show the rest (wider content than box, overflow-x auto or scroll).
_TABLE_FIT = """Array.from(document.querySelectorAll('main table')).map(function(table){
  var box = table.parentElement, style = getComputedStyle(box), root = document.documentElement;
  var rect = table.getBoundingClientRect(), boxRect = box.getBoundingClientRect();
  var visibleRight = boxRect.left + box.clientLeft + box.clientWidth, section = table.closest('section');
  var clips = function(el){ return ['hidden', 'clip'].indexOf(getComputedStyle(el).overflowX) >= 0; };
  var pageScrolls = root.scrollWidth > root.clientWidth && !clips(root) && !clips(document.body);
  return {section: section ? section.id : '(none)', width: Math.round(rect.width), right: Math.round(rect.right),
    visibleRight: Math.round(visibleRight), overflowX: style.overflowX,
    fits: rect.right <= visibleRight + 0.5 && (rect.right <= root.clientWidth + 0.5 || pageScrolls),
    scrolls: box.scrollWidth > box.clientWidth && ['auto', 'scroll'].indexOf(style.overflowX) >= 0};
})"""


def test_every_table_can_be_seen_in_full_in_a_1400_px_window(rendered):
    report, _, _, _ = rendered
    with Browser(width=1400, height=900, timeout_s=60) as browser:
        browser.open(report.resolve().as_uri())
        browser.wait_for("location.protocol === 'file:' && document.readyState === 'complete'", timeout_s=60)
        assert browser.evaluate("window.innerWidth") == 1400
        tables = browser.evaluate(_TABLE_FIT)
    assert "phases" in {t["section"] for t in tables}  # the timeline's phases give a per-phase table
    for t in tables:
        assert t["fits"] or t["scrolls"], (
            f"section {t['section']}: a {t['width']} px table ends at x={t['right']}, its container shows up to "
            f"x={t['visibleRight']} and does not scroll sideways (overflow-x {t['overflowX']})"
        )


@pytest.fixture(scope="module")
def second_night(rendered, tmp_path_factory):
    """The same run as a second night one day later with a slower p99: a sweep/A-B partner."""
    import json
    import shutil

    report, _, _, _ = rendered
    other = tmp_path_factory.mktemp("night2") / "run2"
    shutil.copytree(report.parent, other)
    summary = json.loads((other / "summary.json").read_text())
    summary["run"]["run_id"] = "run2"
    summary["run"]["t0_ns"] = (summary["run"]["t0_ns"] or 0) + 86_400 * 10**9
    summary["sojourn_ms"]["p99"] = (summary["sojourn_ms"]["p99"] or 1.0) * 3
    (other / "summary.json").write_text(json.dumps(summary))
    return report.parent, other


def _plotly_charts(dom: str) -> int:
    return len(re.findall(r'class="[^"]*js-plotly-plot', dom))


def test_the_comparison_page_renders_in_the_browser(second_night, tmp_path):
    first, second = second_night
    out = tmp_path / "compare.html"
    result = sojourn("compare", str(first), str(second), "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    dom, errors, screenshot = render_in_chromium(out, tmp_path)
    assert errors == []
    assert _plotly_charts(dom) >= 2  # overlaid sojourn distributions and throughput
    assert "run2" in dom and Path(screenshot).stat().st_size > 20_000


def test_the_nightly_index_renders_in_the_browser(second_night, tmp_path):
    import json

    from analysis.history import build_history
    from analysis.report.index import render_index

    summaries = [json.loads((d / "summary.json").read_text()) for d in second_night]
    out = tmp_path / "index.html"
    out.write_text(render_index(build_history(summaries, window=1, tolerance=0.2)), encoding="utf-8")
    dom, errors, screenshot = render_in_chromium(out, tmp_path)
    assert errors == []
    assert _plotly_charts(dom) >= 1  # one trend chart per key metric
    # night two's sojourn p99 is 3x night one's (the baseline, window 1): flagged as a regression
    assert "+ regression" in dom
    assert Path(screenshot).stat().st_size > 20_000
