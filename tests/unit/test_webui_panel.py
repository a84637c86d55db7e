"""The web UI's scenario panel and page injection (loadgen.run.webui), without Locust or a browser."""

from __future__ import annotations

from loadgen.run.webui import HIDDEN_FIELDS, describe_scenario, inject, panel_html
from tests.unit.scenario_files import load

SCENARIO = """\
name: ui-demo
description: a demo <b>not bold</b>
broker: {url: "amqp://alice:s3cret@broker.example:5672/"}
queue: {name: q.demo}
run: {duration_s: 40, warmup_s: 5, drain_timeout_s: 20}
producers:
  - {name: main, rate: 150}
consumers:
  - {name: main, prefetch: 20, processing_ms: 4}
  - {name: slow, prefetch: 5, processing_ms: {distribution: exponential, mean_ms: 9}}
timeline:
  - name: busy
    start_s: 15
    end_s: 30
    set:
      consumers.main.count: 2
"""


def _panel(tmp_path, run_dir="/runs/r1", message=""):
    return panel_html(describe_scenario(load(tmp_path, SCENARIO)), run_dir, message)


def test_the_panel_names_the_scenario_its_phases_and_the_run_directory(tmp_path):
    page = _panel(tmp_path)
    assert '<span id="sojourn-scenario-name">ui-demo</span>' in page
    assert "<b>busy</b> 15–30 s: consumers.main.count = 2" in page
    assert '<code id="sojourn-run-dir">/runs/r1</code>' in page
    assert "40 s of load, the first 5 s warm-up, then up to 20 s of drain" in page


def test_processing_times_read_as_times(tmp_path):
    page = _panel(tmp_path)
    assert "consumers main ×1, prefetch 20, processing 4 ms" in page
    assert "consumers slow ×1, prefetch 5, processing exponential, mean_ms 9" in page


def test_the_broker_password_is_masked(tmp_path):
    page = _panel(tmp_path)
    assert "s3cret" not in page
    assert "amqp://alice:****@broker.example:5672/" in page


def test_scenario_text_is_escaped_not_markup(tmp_path):
    assert "a demo &lt;b&gt;not bold&lt;/b&gt;" in _panel(tmp_path)


def test_a_scenario_without_phases_says_so(tmp_path):
    text = SCENARIO[: SCENARIO.index("timeline:")]
    page = panel_html(describe_scenario(load(tmp_path, text)), "/r")
    assert "phases: none" in page


def test_inject_puts_the_style_in_the_head_and_the_panel_first_in_the_body():
    page = '<html><head><title>Locust</title></head><body class="x"><div id="root"></div></body></html>'
    out = inject(page, "<style>S</style>", "<section>P</section>")
    assert out == (
        '<html><head><title>Locust</title><style>S</style></head><body class="x"><section>P</section>'
        '<div id="root"></div></body></html>'
    )


def test_the_installed_locust_ui_names_its_form_fields_as_the_removal_expects():
    """A canary: the removal finds the fields by their input names in Locust's React bundle."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("locust")  # located, not imported (Locust patches the world)
    assert spec is not None and spec.submodule_search_locations
    assets = Path(next(iter(spec.submodule_search_locations))) / "webui" / "dist" / "assets"
    bundle = "".join(p.read_text(encoding="utf-8") for p in assets.glob("*.js"))
    for name in HIDDEN_FIELDS:
        assert f"name:`{name}`" in bundle, name
