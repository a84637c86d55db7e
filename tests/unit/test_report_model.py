"""The queueing-model arithmetic (DOMAIN.md §2, the RabbitMQ blog's worked example) and its report section."""

from __future__ import annotations

import pytest

from analysis.summary.model import advise, predict


def test_prefetch_one_on_a_104_ms_round_trip_with_4_ms_processing():
    got = predict(1, 104.0, 4.0)  # 50 ms each way + 4 ms processing
    assert got["saturation_prefetch"] == 26
    assert got["utilisation"] == pytest.approx(4 / 104)
    assert got["throughput_per_s"] == pytest.approx(1000 / 104)
    assert got["buffer_wait_ms"] == 0.0


def test_prefetch_26_saturates_with_an_empty_buffer():
    got = predict(26, 104.0, 4.0)
    assert got["utilisation"] == 1.0 and got["throughput_per_s"] == 250.0
    assert got["buffer_wait_ms"] == pytest.approx(0.0)


def test_prefetch_51_adds_about_100_ms_of_buffer_wait():
    assert predict(51, 104.0, 4.0)["buffer_wait_ms"] == pytest.approx(100.0)


def test_slow_processing_40_ms_with_prefetch_26_waits_about_880_ms():
    # R = 100 + 40 = 140, R/p = 3.5: (26 - 3.5) x 40 = 900 (the blog rounds to ~22 messages ahead: 880)
    assert predict(26, 140.0, 40.0)["buffer_wait_ms"] == pytest.approx(900.0)


@pytest.mark.parametrize("args", [(None, 104.0, 4.0), (1, None, 4.0), (1, 104.0, 0.0), (0, 104.0, 4.0)])
def test_missing_or_unbounded_inputs_predict_nothing_beyond_saturation(args):
    got = predict(*args)
    assert got["utilisation"] is None and got["buffer_wait_ms"] is None


def test_advice_prefetch_covers_the_p95_round_trip_and_codel_uses_p99_processing():
    got = advise(4.0, 204.0, 20.0)  # network at half speed: 100 ms each way
    assert got["prefetch"] == 51
    assert got["codel_interval_ms"] == 20.0 and got["codel_target_ms"] == 20.0
    assert all(got[k] for k in ("prefetch_why", "codel_interval_why", "codel_target_why"))
    assert advise(None, None, None) == dict.fromkeys(got)


# --- the report's new sections -----------------------------------------------------

from analysis.report import render_report  # noqa: E402
from analysis.summary.model import model_row  # noqa: E402
from analysis.transforms.model import QUANTILES  # noqa: E402
from tests.unit.test_report import figure, make_summary, section_text  # noqa: E402


def _deep_summary() -> dict:
    summary = make_summary()
    for c, scale in zip(summary["consumers"], (1.0, 3.0)):
        c["sojourn_quantiles_ms"] = {"q": list(QUANTILES), "ms": [scale * i for i in range(20)]}
    summary["model"] = {
        "consumers": [
            model_row(
                {
                    "consumer": "main/host:1/0",
                    "prefetch_max": 51,
                    "prefetch_min": 51,
                    "processing_mean_ms": 4.0,
                    "processing_p99_ms": 20.0,
                    "transit_min_ms": 50.0,
                    "transit_p95_ms": 100.0,
                    "sojourn_mean_ms": 98.0,
                    "throughput_per_s": 240.0,
                    "utilisation": 0.875,
                }
            ),
            model_row(
                {
                    "consumer": "slow/host:2/0",
                    "prefetch_max": 1,
                    "prefetch_min": 1,
                    "processing_mean_ms": 4.0,
                    "transit_min_ms": 50.0,
                    "utilisation": 0.5,
                }
            ),
        ],
        "phases": [
            {
                **model_row(
                    {
                        "consumer": "main/host:1/0",
                        "phase": ph,
                        "prefetch_max": 51,
                        "processing_mean_ms": p,
                        "transit_min_ms": 50.0,
                    }
                ),
                "phase": ph,
            }
            for ph, p in (("base", 4.0), ("slow_processing", 40.0))
        ],
    }
    return summary


@pytest.fixture(scope="module")
def deep_page():
    return render_report(_deep_summary())


def test_components_chart_stacks_the_four_parts_per_window(deep_page):
    data, _ = figure(deep_page, "chart-components")
    stacked = [t for t in data if t.get("stackgroup") == "latency"]
    assert [t["name"] for t in stacked] == ["broker + network", "buffer sojourn", "processing", "ack delay"]
    assert stacked[1]["y"] == [1.0 + t for t in range(10)]


def test_cdf_chart_has_one_line_per_consumer(deep_page):
    data, _ = figure(deep_page, "chart-cdf")
    lines = [t for t in data if t["type"] == "scatter"]
    assert [t["name"] for t in lines] == ["main/host:1/0", "slow/host:2/0"]
    assert lines[1]["x"][-1] == 57.0 and lines[1]["y"][-1] == 1.0


def test_utilisation_bars_show_measured_beside_predicted(deep_page):
    data, _ = figure(deep_page, "chart-utilisation")
    bars = {t["name"]: t["y"] for t in data if t["type"] == "bar"}
    assert bars["measured"] == [0.875, 0.5]
    assert bars["predicted (model, with a backlog)"] == pytest.approx([1.0, 4 / 104])


def test_model_table_shows_saturation_prefetch_and_predicted_vs_measured(deep_page):
    text = section_text(deep_page, "model")
    assert "104" in text and "26" in text  # R and ceil(R/p)
    assert "100 / 98.0" in text  # buffer wait predicted (51 - 26) x 4 vs measured
    assert "3.8 % / 50.0 %" in text  # prefetch 1: 4/104 predicted


def test_advice_gives_prefetch_and_codel_settings_with_reasons(deep_page):
    text = section_text(deep_page, "model")
    assert "prefetch 51" in text  # ceil((4 + 2 x 100) / 4)
    assert "CoDel interval 20.0 ms" in text and "CoDel target 20.0 ms" in text
    assert "p95" in text and "p99 processing" in text


def test_new_sections_render_with_empty_data():
    page = render_report({})
    assert "No latency components in this summary" in page
    assert "No per-consumer sojourn quantiles" in page
    assert "No consumer utilisation" in page
    assert "No consumer had enough measured deliveries" in section_text(page, "model")


def test_per_phase_rows_appear_when_the_model_has_them(deep_page):
    text = section_text(deep_page, "model")
    assert "Per consumer and phase" in text
    assert "slow_processing" in text and "140" in text  # R = 40 + 2 x 50
    assert "Per consumer and phase" not in section_text(render_report(make_summary()), "model")
