"""A 100,000-message run of benchmarks/synth.py, analysed as `sojourn analyze` does.

The expected accounting comes from the generator's own draws (synth.json), not from the
analysis; the sojourn percentiles are checked against numpy on the trace files themselves, within
the relative error summary.json states for its log-bucket histograms.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from analysis.buckets import GAMMA
from analysis.job import analyze
from analysis.summary.histogram import histogram_edges
from benchmarks.synth import generate

MESSAGES = 100_000


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory, spark):
    run_dir = tmp_path_factory.mktemp("synth") / "synth-100k"
    drawn = generate(run_dir, MESSAGES, seed=11)
    return drawn, analyze(run_dir, spark=spark)


def test_the_accounting_is_exactly_what_the_generator_drew(synthetic):
    drawn, summary = synthetic
    assert summary["messages"] == drawn.messages
    assert drawn.messages["published"] == MESSAGES
    assert all(
        drawn.messages["discarded"][k] > 0
        for k in ("publish_nacked", "publish_failed", "unroutable", "consumer_nack_discard", "dead_lettered_maxlen")
    )
    assert drawn.messages["left_in_broker"] > 0 and drawn.messages["redelivered"] > 0


def _measured_sojourns(run_dir, warmup_end_ns: int) -> np.ndarray:
    """Sojourn (start - receive, ms) of the deliveries whose message was intended after the warm-up,
    read with pyarrow: the intended time comes from the message's publish row."""
    publishes = pq.read_table(run_dir / "traces" / "publish", columns=["message_id", "intended_ns"]).to_pydict()
    intended = dict(zip(publishes["message_id"], publishes["intended_ns"]))
    deliveries = pq.read_table(
        run_dir / "traces" / "delivery", columns=["message_id", "receive_ns", "start_ns", "publish_ns"]
    ).to_pydict()
    out = []
    for m, receive, start, pub in zip(
        deliveries["message_id"], deliveries["receive_ns"], deliveries["start_ns"], deliveries["publish_ns"]
    ):
        when = intended.get(m, pub if pub is not None else receive)
        if start is not None and when >= warmup_end_ns:
            out.append((start - receive) / 1e6)
    return np.sort(np.array(out))


def test_the_sojourn_percentiles_are_within_the_stated_relative_error_of_numpy(synthetic):
    drawn, summary = synthetic
    p = drawn.params
    stated = summary["percentiles"]["log_histogram"]
    assert "sojourn_ms" in stated["applies_to"]
    error = stated["relative_error"]
    assert 0 < error <= 0.01
    values = _measured_sojourns(drawn.out_dir, p.t0_ns + int(p.warmup_s * 1e9))
    assert summary["sojourn_ms"]["count"] == len(values)
    for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
        exact = float(np.quantile(values, q))  # numpy's linear interpolation, as Spark's percentile
        got = summary["sojourn_ms"][name]
        assert abs(got - exact) <= error * abs(exact), (name, exact, got)
    assert summary["sojourn_ms"]["max"] == pytest.approx(values[-1])
    assert summary["sojourn_ms"]["mean"] == pytest.approx(values.mean())


def test_the_sojourn_histogram_counts_every_measured_delivery_in_its_bin(synthetic):
    drawn, summary = synthetic
    p = drawn.params
    values = _measured_sojourns(drawn.out_dir, p.t0_ns + int(p.warmup_s * 1e9))
    edges, counts = summary["sojourn_histogram"]["edges_ms"], summary["sojourn_histogram"]["counts"]
    assert counts == np.histogram(values, edges)[0].tolist()
    # the edges are the nice ones of the values' range, but where one fell inside a log bucket
    nice = histogram_edges(float(values[0]), float(values[-1]))
    assert len(edges) == len(nice)
    assert all(n - e < (GAMMA - 1) * abs(n) for e, n in zip(edges, nice) if e != n)
