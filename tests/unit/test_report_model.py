"""The queueing-model arithmetic (docs/queueing.md, the RabbitMQ blog's worked example), the regime that says
where it applies, processing drawn vs achieved, and their report section and verdict chip."""

from __future__ import annotations

import pytest

from analysis.summary.model import (
    advise,
    backlog_share,
    model_block,
    model_row,
    predict,
    prefetch_advice,
    processing_check,
    regime,
)


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


# --- regime, round trip, processing -------------------------------------------------


@pytest.mark.parametrize(
    "utilisation, empty, backlog, expected",
    [
        (0.439, 0.77, 0.0, "unsaturated"),  # the quickstart's base phase: busy 43.9 %, queue never backed up
        (0.95, 0.99, 0.0, "saturated"),  # busy >= 90 %, whatever the buffer
        (0.6, 0.05, 0.0, "saturated"),  # 95 % of deliveries found a message already waiting
        (0.51, 1.0, 1.0, "starved"),  # half busy while the queue always had messages ready
        (0.51, 1.0, 0.4, "unsaturated"),  # a backlog in only 40 % of the samples
        (0.51, 1.0, None, "unsaturated"),  # no queue samples: no evidence of a backlog
    ],
)
def test_the_regime_follows_the_documented_thresholds(utilisation, empty, backlog, expected):
    name, why = regime(utilisation, empty, backlog)
    assert name == expected and why


def test_no_utilisation_means_no_regime():
    assert regime(None, 0.0, 1.0) == (None, None)


def _row(**inputs) -> dict:
    base = {"consumer": "c/h:1/0", "prefetch_max": 26, "prefetch_min": 26, "processing_mean_ms": 4.0}
    return model_row({**base, **inputs})


def test_an_unsaturated_consumer_gets_no_prediction_and_says_why():
    # The quickstart's base phase: 43.9 % busy, the queue never held a message, 8.8 ms measured wait
    row = _row(utilisation=0.439, buffer_empty_share=0.77, backlog_share=0.0, transit_min_ms=0.15, sojourn_mean_ms=8.8)
    assert row["regime"] == "unsaturated"
    assert row["check"]["applies"] is False
    assert row["check"]["predicted"] is None
    assert row["check"]["not_applicable"] == "not applicable: unsaturated (offered load below capacity)"
    assert row["predicted"]["utilisation"] == 1.0  # the legacy key keeps the saturated formula's value


def test_a_starved_consumer_is_predicted_from_the_ack_to_delivery_round_trip():
    # 100 ms from an ack to the delivery it drew, p 4 ms: R = 104, R/p = 26; a backlog made the
    # fastest publish -> receive 500 ms, which the legacy R (4 + 2 x 500) takes for transit
    row = _row(
        prefetch_max=13,
        utilisation=0.5,
        buffer_empty_share=1.0,
        backlog_share=1.0,
        transit_min_ms=500.0,
        ack_to_delivery_count=1000,
        ack_to_delivery_p50_ms=100.0,
    )
    check = row["check"]
    assert row["regime"] == "starved" and check["applies"] is True
    assert check["round_trip_ms"] == 104.0 and check["round_trip_source"] == "ack_to_delivery"
    assert check["saturation_prefetch"] == 26
    assert check["predicted"]["utilisation"] == pytest.approx(13 * 4 / 104)  # n p / R = 50 %
    assert check["predicted"]["throughput_per_s"] == pytest.approx(1000 * 13 / 104)
    assert row["round_trip_ms"] == 1004.0  # legacy key unchanged


def test_without_a_drawn_delivery_the_round_trip_falls_back_to_twice_the_fastest_transit():
    row = _row(utilisation=0.95, transit_min_ms=50.0)
    assert row["check"]["round_trip_ms"] == 104.0 and row["check"]["round_trip_source"] == "transit_min"
    assert row["check"]["predicted"]["buffer_wait_ms"] == pytest.approx(0.0)  # prefetch 26 = R/p


@pytest.mark.parametrize(
    "inputs, reason",
    [
        ({"auto_ack": True}, "not applicable: auto-ack (no prefetch window)"),
        ({"prefetch_max": 0}, "not applicable: unlimited prefetch"),
        ({"transit_min_ms": None}, "not applicable: no round trip or processing time measured"),
        # A starved consumer behind a backlog filled during the warm-up: every message it got was
        # published then, so none counts (the processing mean is missing with them).
        (
            {"measured_deliveries": None, "processing_mean_ms": None},
            "not applicable: none of its deliveries was measured (all were published during the warm-up)",
        ),
    ],
)
def test_a_saturated_consumer_outside_the_models_assumptions_gets_no_prediction(inputs, reason):
    row = _row(**{"utilisation": 0.99, "transit_min_ms": 0.2, **inputs})
    assert row["regime"] == "saturated"
    assert row["check"]["predicted"] is None and row["check"]["not_applicable"] == reason


def test_an_auto_ack_consumer_gets_no_prefetch_advice():
    row = _row(utilisation=0.99, transit_min_ms=0.2, auto_ack=True)
    assert row["prefetch_advice"]["prefetch"] is None
    assert row["check"]["saturation_prefetch"] == 2  # ceil(4.4 / 4): arithmetic, not advice


def test_prefetch_advice_is_ceil_r_over_p_with_its_arithmetic():
    got = prefetch_advice(204.0, 4.0, "ack_to_delivery", 200.0)
    assert got["prefetch"] == 51 and got["ratio"] == 51.0
    assert "R = 204 ms" in got["why"] and "p = 4 ms" in got["why"] and "R/p = 51" in got["why"]
    assert prefetch_advice(None, 4.0, None, None)["prefetch"] is None


def test_one_prefetch_advice_per_consumer_names_a_phase_that_needs_more():
    class Row(dict):
        def asDict(self):  # pyspark's Row method
            return dict(self)

    common = {"consumer": "c", "prefetch_max": 26, "prefetch_min": 26, "processing_mean_ms": 4.0}
    whole = Row(common, utilisation=None, span_start_s=0.0, span_end_s=40.0)
    phases = [
        Row(common, phase="normal", utilisation=0.98, span_start_s=0.0, span_end_s=20.0),
        Row(common, phase="slow-network", utilisation=0.51, span_start_s=20.0, span_end_s=40.0),
    ]
    drawn = [
        Row(consumer="c", phase=None, ack_to_delivery_count=20, ack_to_delivery_p50_ms=150.0),
        Row(consumer="c", phase="normal", ack_to_delivery_count=10, ack_to_delivery_p50_ms=100.0),
        Row(consumer="c", phase="slow-network", ack_to_delivery_count=10, ack_to_delivery_p50_ms=200.0),
    ]
    samples = [{"t_s": float(t), "ready": 5} for t in range(40)]
    block = model_block(
        [whole], phases, [{"consumer": "c", "utilisation": 0.75}], drawn, samples, [("slow-network", 20.0, 40.0)]
    )
    (row,) = block["consumers"]
    assert row["prefetch_advice"]["prefetch"] == 39  # ceil((4 + 150) / 4)
    assert "Phase slow-network needs 51" in row["prefetch_advice"]["why"]  # ceil((4 + 200) / 4)
    by_phase = {r["phase"]: r for r in block["phases"]}
    assert by_phase["normal"]["regime"] == "saturated" and by_phase["slow-network"]["regime"] == "starved"
    assert by_phase["slow-network"]["check"]["queue_samples"] == 20  # the samples of t 20..39 only
    assert row["regime"] == "starved"  # 75 % busy with a backlog in every sample


def test_backlog_share_counts_the_samples_in_the_span_and_phase():
    samples = [{"t_s": 0.5, "ready": 0}, {"t_s": 1.5, "ready": 3}, {"t_s": 2.5, "ready": 7}, {"t_s": 9.0, "ready": 9}]
    assert backlog_share(samples, 0.0, 3.0, None, []) == (2 / 3, 3)
    assert backlog_share(samples, 0.0, 3.0, "busy", [("busy", 2.0, 3.0)]) == (1.0, 1)
    assert backlog_share(samples, 0.0, 3.0, "base", [("busy", 2.0, 3.0)]) == (0.5, 2)
    assert backlog_share([], 0.0, 3.0, None, []) == (None, 0)


def test_processing_10_ms_drawn_11_achieved_is_a_10_percent_overshoot():
    got = processing_check(10.0, 11.0, 100)
    assert got["overshoot"] == pytest.approx(0.10) and got["stretched"] is True
    assert processing_check(6.0, 6.16, 100)["stretched"] is False  # 2.7 %: within 5 %
    assert processing_check(1.42, 1.49, 3)["stretched"] is False  # 4.9 %... and only 3 deliveries
    assert processing_check(0.0, 0.01, 100)["overshoot"] is None  # nothing drawn: no ratio


# --- the report -------------------------------------------------------------------------

from analysis.report import render_report  # noqa: E402
from analysis.transforms.stats import QUANTILES  # noqa: E402
from tests.unit.test_report import figure, make_summary, section_text  # noqa: E402


def _deep_summary() -> dict:
    summary = make_summary()
    for c, scale in zip(summary["consumers"], (1.0, 3.0)):
        c["sojourn_quantiles_ms"] = {"q": list(QUANTILES), "ms": [scale * i for i in range(20)]}
    summary["model"] = {
        "consumers": [
            # saturated: busy 97.5 %, R from the ack -> delivery time: 4 + 100 = 104
            model_row(
                {
                    "consumer": "main/host:1/0",
                    "prefetch_max": 51,
                    "prefetch_min": 51,
                    "processing_mean_ms": 4.0,
                    "processing_p99_ms": 20.0,
                    "transit_min_ms": 300.0,
                    "transit_p95_ms": 400.0,
                    "ack_to_delivery_count": 500,
                    "ack_to_delivery_p50_ms": 100.0,
                    "sojourn_mean_ms": 98.0,
                    "throughput_per_s": 240.0,
                    "utilisation": 0.975,
                    "buffer_empty_share": 0.0,
                    "backlog_share": 1.0,
                    "processing_drawn_ms": 4.0,
                    "processing_achieved_ms": 4.0,
                    "processing_count": 900,
                }
            ),
            # unsaturated: busy 43.9 %, the queue never backed up
            model_row(
                {
                    "consumer": "slow/host:2/0",
                    "prefetch_max": 20,
                    "prefetch_min": 20,
                    "processing_mean_ms": 4.0,
                    "transit_min_ms": 0.2,
                    "sojourn_mean_ms": 8.8,
                    "throughput_per_s": 110.0,
                    "utilisation": 0.439,
                    "buffer_empty_share": 0.77,
                    "backlog_share": 0.0,
                    "processing_drawn_ms": 6.0,
                    "processing_achieved_ms": 6.6,
                    "processing_count": 400,
                }
            ),
        ],
        "phases": [
            model_row(
                {
                    "consumer": "main/host:1/0",
                    "phase": ph,
                    "prefetch_max": 51,
                    "processing_mean_ms": p,
                    "transit_min_ms": 50.0,
                    "utilisation": 0.99,
                }
            )
            for ph, p in (("base", 4.0), ("slow_processing", 40.0))
        ],
        "rules": {"overshoot_limit": 0.05},
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


def test_utilisation_bars_predict_only_where_the_model_applies(deep_page):
    data, _ = figure(deep_page, "chart-utilisation")
    bars = {t["name"]: t["y"] for t in data if t["type"] == "bar"}
    assert bars["measured"] == [0.875, 0.5]
    assert bars["predicted (model, where it applies)"] == [1.0, None]  # 51 >= R/p = 26: saturated; none


def test_a_saturated_row_shows_its_prediction_beside_the_measurement(deep_page):
    text = section_text(deep_page, "model")
    assert "saturated" in text
    assert "104 (ack→delivery)" in text  # R = 4 + 100
    assert "100 / 98.0" in text  # buffer wait (51 - 26) x 4 predicted vs 98 measured
    assert "250 / 240" in text  # throughput 1000 / 4 predicted


def test_an_unsaturated_row_says_not_applicable_and_predicts_nothing(deep_page):
    text = section_text(deep_page, "model")
    assert "unsaturated not applicable: unsaturated (offered load below capacity)" in text
    assert "– / 43.9 %" in text and "– / 8.80" in text  # no prediction, the measurement only
    assert "100.0 % / 43.9 %" not in text and "75.6" not in text  # the formula: (20 - 4.4/4) x 4 ms wait


def test_advice_gives_one_prefetch_per_consumer_with_its_arithmetic_and_codel_settings(deep_page):
    text = section_text(deep_page, "model")
    assert text.count("prefetch 26 —") == 1  # ceil(104 / 4) for main
    assert "R = 104 ms" in text and "R/p = 26" in text
    assert "prefetch 2 —" in text  # slow: ceil((4 + 2 x 0.2) / 4)
    assert "CoDel interval 20.0 ms" in text and "CoDel target 20.0 ms" in text
    assert "prefetch 101" not in text  # the legacy R_p95 advice, ceil((4 + 800) / 4), is not shown


def test_processing_table_shows_drawn_achieved_and_the_overshoot(deep_page):
    text = section_text(deep_page, "model")
    assert "slow/host:2/0 whole run 400 6.00 6.60 +10.0 % ✗" in text
    assert "main/host:1/0 whole run 900 4.00 4.00 +0.0 %" in text


def test_the_verdict_flags_processing_stretched_by_cpu_contention(deep_page):
    text = section_text(deep_page, "verdict")
    assert "processing ran long" in text
    assert "+10.0 % for slow/host:2/0 (whole run): 6.60 ms achieved for 6.00 ms drawn" in text


def test_the_verdict_says_nothing_of_processing_within_5_percent():
    summary = _deep_summary()
    summary["model"]["consumers"][1]["processing"]["stretched"] = False
    assert "processing ran long" not in section_text(render_report(summary), "verdict")


def test_a_summary_from_before_the_regimes_renders_the_saturated_formula():
    summary = _deep_summary()
    for row in summary["model"]["consumers"]:
        for key in ("regime", "check", "processing", "prefetch_advice"):
            row.pop(key)
    text = section_text(render_report(summary), "model")
    assert "1.00e+03" not in text and "604" in text  # legacy R = 4 + 2 x 300 for main
    assert "prefetch 201" in text  # legacy advice: ceil((4 + 2 x 400) / 4)
    assert "No delivery recorded both" in text


def test_new_sections_render_with_empty_data():
    page = render_report({})
    assert "No latency components in this summary" in page
    assert "No per-consumer sojourn quantiles" in page
    assert "No consumer utilisation" in page
    assert "No consumer had enough measured deliveries" in section_text(page, "model")
    assert "processing ran long" not in page


def test_per_phase_rows_appear_when_the_model_has_them(deep_page):
    text = section_text(deep_page, "model")
    assert "Per consumer and phase" in text
    assert "slow_processing" in text and "140" in text  # R = 40 + 2 x 50
    assert "Per consumer and phase" not in section_text(render_report(make_summary()), "model")
