"""The analysis benchmark's DuckDB and pandas baselines, on a hand-made run whose answers are worked out below.

Times are ms after t0 (plus t0, a realistic ns wall clock: a baseline that went through float64
would be off by up to 256 ns). Warm-up ends at 1000 ms.

    publishes  id  intended  publish_ns
               m0  1500      1500  (a retry, first in the file)
               m0   500       500
               m1  1000      1001      m4  2100  2101
               m2  1100      1101      m5  2200  2201
               m3  2000      2001      m6  2300  2301

    deliveries  id  consumer  receive  start  end   settle  outcome
                m0  c3        1510     1520   1530  1531    ack
                m1  c1        1003     1004   1005  1006    ack
                m2  c1        1103     1105   1106  1107    ack
                m3  c2        2003     2006   2007  2003    auto_ack  (no publish_ns header)
                m4  c2        2103     -      -     -       unsettled
                m4  c2        2104     2108   2109  2110    ack
                m6  c1        2303     -      -     2304    nack_discard
                -   c3        4100     4200   4201  4202    ack  (a foreign message: publish_ns header 200)

m0 counts as intended at 500 ms (the earlier of its two publishes): warm-up. The foreign message
falls back to its publish_ns header, 200 ms: warm-up. Measured sojourns: 1, 2, 3, 4 ms; measured
end to end: 4, 5, 6 (m3's publish time taken from the publish trace) and 8 ms.
"""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import schema
from benchmarks import analysis_baselines as baselines

T0 = 1_795_000_000_123_456_789
WARMUP_S = 1.0
REPO = Path(__file__).resolve().parents[2]


def at(ms: int | None) -> int | None:
    return None if ms is None else T0 + ms * 1_000_000


def _publish(message_id: str, intended_ms: int, publish_ms: int) -> dict:
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": "r",
        "worker": "h:1",
        "message_id": message_id,
        "producer": "p/h/0",
        "producer_group": "p",
        "seq": 0,
        "phase": "base",
        "intended_ns": at(intended_ms),
        "publish_ns": at(publish_ms),
        "size_bytes": 100,
        "routing_key": "q",
        "persistent": False,
        "confirm_ns": None,
        "outcome": "sent",
    }


def _delivery(
    message_id: str | None,
    consumer: str,
    publish_ms: int | None,
    receive_ms: int,
    start_ms: int | None,
    end_ms: int | None,
    settle_ms: int | None,
    outcome: str,
) -> dict:
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": "r",
        "worker": "h:2",
        "message_id": message_id,
        "consumer": consumer,
        "consumer_group": consumer,
        "phase": "base",
        "delivery_tag": 1,
        "redelivered": False,
        "publish_ns": at(publish_ms),
        "receive_ns": at(receive_ms),
        "start_ns": at(start_ms),
        "end_ns": at(end_ms),
        "settle_ns": at(settle_ms),
        "outcome": outcome,
        "prefetch": 10,
        "buffer_len": 0,
        "size_bytes": 100,
    }


PUBLISHES = [
    _publish("m0", 1500, 1500),
    _publish("m0", 500, 500),
    _publish("m1", 1000, 1001),
    _publish("m2", 1100, 1101),
    _publish("m3", 2000, 2001),
    _publish("m4", 2100, 2101),
    _publish("m5", 2200, 2201),
    _publish("m6", 2300, 2301),
]
DELIVERIES = [
    _delivery("m0", "c3", 500, 1510, 1520, 1530, 1531, "ack"),
    _delivery("m1", "c1", 1001, 1003, 1004, 1005, 1006, "ack"),
    _delivery("m2", "c1", 1101, 1103, 1105, 1106, 1107, "ack"),
    _delivery("m3", "c2", None, 2003, 2006, 2007, 2003, "auto_ack"),
    _delivery("m4", "c2", 2101, 2103, None, None, None, "unsettled"),
    _delivery("m4", "c2", 2101, 2104, 2108, 2109, 2110, "ack"),
    _delivery("m6", "c1", 2301, 2303, None, None, 2304, "nack_discard"),
    _delivery(None, "c3", 200, 4100, 4200, 4201, 4202, "ack"),
]
NOTHING = {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}


def _write(directory: Path, name: str, kind: str, rows: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    arrow = schema.arrow_schema(kind)
    columns = {c: [row.get(c) for row in rows] for c in arrow.names}
    pq.write_table(pa.Table.from_pydict(columns, schema=arrow), directory / name)


def _make_run(run_dir: Path) -> Path:
    (run_dir / "run.json").write_text(json.dumps({"t0_ns": T0, "duration_s": 5, "warmup_s": WARMUP_S}))
    # Two publish part files, and files the analysis does not read, which must not count.
    _write(run_dir / "traces" / "publish", "part-0.parquet", "publish", PUBLISHES[:4])
    _write(run_dir / "traces" / "publish", "part-1.parquet", "publish", PUBLISHES[4:])
    _write(run_dir / "traces" / "publish", "_partial.parquet", "publish", PUBLISHES)
    _write(run_dir / "traces" / "delivery", "part-0.parquet", "delivery", DELIVERIES)
    _write(run_dir / "traces" / "delivery", ".hidden.parquet", "delivery", DELIVERIES)
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return _make_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module", params=["pandas", "duckdb"])
def summary(request, run_dir) -> dict:
    if request.param == "duckdb":
        pytest.importorskip("duckdb")
    return baselines.BASELINES[request.param](run_dir)


def _approx_block(count, mean, p50, p95, p99, max_) -> dict:
    return {
        "count": count,
        **{
            k: pytest.approx(v, rel=1e-12, abs=0)
            for k, v in (("mean", mean), ("p50", p50), ("p95", p95), ("p99", p99), ("max", max_))
        },
    }


def test_overall_sojourn_counts_only_deliveries_intended_after_the_warmup(summary):
    # 1, 2, 3, 4 ms; p95 at rank 3 * 0.95 = 2.85: 3 + 0.85 * (4 - 3).
    assert summary["sojourn_ms"]["overall"] == _approx_block(4, 2.5, 2.5, 3.85, 3.97, 4.0)


def test_end_to_end_takes_a_missing_publish_time_from_the_publish_trace(summary):
    # 4, 5, 6, 8 ms: p95 at rank 2.85: 6 + 0.85 * (8 - 6).
    assert summary["end_to_end_ms"]["overall"] == _approx_block(4, 5.75, 5.5, 7.7, 7.94, 8.0)


def test_per_consumer_stats_list_every_consumer_even_one_with_nothing_measured(summary):
    assert summary["sojourn_ms"]["by_consumer"] == {
        "c1": _approx_block(2, 1.5, 1.5, 1.95, 1.99, 2.0),
        "c2": _approx_block(2, 3.5, 3.5, 3.95, 3.99, 4.0),
        "c3": NOTHING,
    }
    assert summary["end_to_end_ms"]["by_consumer"]["c2"] == _approx_block(2, 7.0, 7.0, 7.9, 7.98, 8.0)


def test_per_second_arrays_cover_every_second_from_the_first_to_the_last_activity(summary):
    per_second = summary["per_second"]
    assert per_second["first_s"] == 0
    assert per_second["published"] == [1, 3, 4, 0, 0]  # by publish_ns: 500 | 1500 1001 1101 | 2001 ...
    assert per_second["acked"] == [0, 3, 2, 0, 1]  # by settle_ns; the foreign ack at 4202
    sojourn = per_second["sojourn_ms"]
    assert sojourn["count"] == [0, 2, 2, 0, 0]  # measured sojourns by start second
    assert sojourn["p50"] == [None, pytest.approx(1.5), pytest.approx(3.5), None, None]
    assert sojourn["max"] == [None, 2.0, 4.0, None, None]


def test_counts_tell_publish_rows_from_message_ids(summary):
    assert summary["rows"] == {"publish": 8, "delivery": 8}
    assert summary["published"] == {"rows": 8, "ids": 7}
    assert summary["acked_deliveries"] == 6


def test_accounting_counts_published_ids_no_delivery_acked(summary):
    # m5 was never delivered, m6 was discarded; the foreign ack is no published id.
    assert summary["accounting"] == {"acked_ids": 5, "not_acked_ids": 2}


def test_duckdb_and_pandas_give_the_same_summary(run_dir):
    pytest.importorskip("duckdb")
    from_duckdb = baselines.duckdb_baseline(run_dir)
    from_pandas = baselines.pandas_baseline(run_dir)
    assert from_duckdb.pop("engine") == "duckdb" and from_pandas.pop("engine") == "pandas"
    _assert_close(from_duckdb, from_pandas)


def _assert_close(a, b, where: str = "summary") -> None:
    """Equal, floats to 12 significant digits (the engines sum in different orders)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-12), where
    else:
        assert a == b, where


def test_the_cli_prints_one_json_object(run_dir, capsys):
    assert baselines.main(["pandas", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out)["published"] == {"rows": 8, "ids": 7}


def test_an_unknown_engine_is_refused_with_the_close_match(run_dir, capsys):
    with pytest.raises(SystemExit) as exit_:
        baselines.main(["duckbd", str(run_dir)])
    assert exit_.value.code == 2
    assert "unknown engine 'duckbd' (did you mean 'duckdb'?)" in capsys.readouterr().err


def test_a_run_without_delivery_traces_is_an_error_naming_the_directory(tmp_path, capsys):
    (tmp_path / "run.json").write_text(json.dumps({"t0_ns": T0, "duration_s": 5}))
    _write(tmp_path / "traces" / "publish", "part-0.parquet", "publish", PUBLISHES)
    assert baselines.main(["pandas", str(tmp_path)]) == 2
    assert f"{tmp_path / 'traces' / 'delivery'}: no Parquet part files" in capsys.readouterr().err


def test_the_columns_read_are_declared_in_the_trace_schema():
    assert set(baselines.PUBLISH_COLUMNS) <= set(schema.column_names("publish"))
    assert set(baselines.DELIVERY_COLUMNS) <= set(schema.column_names("delivery"))


def test_the_baselines_import_neither_pyspark_nor_the_other_engine():
    # Each baseline is timed as a fresh process: loading Spark, or the other engine, would bias it.
    code = (
        "import sys; import benchmarks.analysis_baselines, analysis.schema; "
        "assert 'pyspark' not in sys.modules; assert 'pandas' not in sys.modules; "
        "assert 'duckdb' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
