import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pytest import approx

from analysis import job, traces as trace_files
from analysis.errors import AnalysisError, MissingTracesError, RunFileError, SchemaVersionError, TraceColumnsError
from analysis.job import analyze, read_traces, summarize
from analysis.run_file import load_run_json
from analysis.schema import KINDS, SCHEMA_VERSION, arrow_schema
from analysis.transforms._common import local_rows
from analysis.transforms.codes import decoded, encoded

T0 = 1_763_733_600_000_000_000
MS = 1_000_000
S = 1_000_000_000


def _run_json(run_dir, **overrides):
    run = {
        "schema_version": SCHEMA_VERSION,
        "run_id": "run-1",
        "scenario_path": "scenarios/tiny.yaml",
        "scenario": {"name": "tiny", "slo": ["sojourn_ms.p99 < 200", "messages.unaccounted == 0"]},
        "broker_url": "amqp://guest:****@127.0.0.1:5672/",
        "code_version": {"sojourn": "0.1.0"},
        "t0_ns": T0,
        "duration_s": 4,
        "warmup_s": 1,
        "drain_timeout_s": 5,
        "phases": [{"name": "slow", "start_s": 2.0, "end_s": 4.0}],
        "queue": "q",
        "broker_depth_at_end": 1,
        "ended_ns": T0 + 5 * S,
        "status": "completed",
        **overrides,
    }
    (run_dir / "run.json").write_text(json.dumps(run))


def _publish(m, intended_ms, outcome="confirmed"):
    publish = T0 + (intended_ms + 1) * MS
    return dict(
        message_id=m,
        intended_ns=T0 + intended_ms * MS,
        publish_ns=publish,
        confirm_ns=publish + 2 * MS if outcome == "confirmed" else None,
        outcome=outcome,
    )


def _delivery(m, intended_ms, sojourn_ms):
    receive = T0 + (intended_ms + 6) * MS  # published at +1 ms, received 5 ms later
    start = receive + sojourn_ms * MS
    return dict(
        message_id=m,
        publish_ns=T0 + (intended_ms + 1) * MS,
        receive_ns=receive,
        start_ns=start,
        end_ns=start + 20 * MS,
        settle_ns=start + 21 * MS,
        outcome="ack",
    )


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, spark, write_trace):
    run_dir = tmp_path_factory.mktemp("run")
    _run_json(run_dir)
    write_trace(run_dir, "publish", [_publish("a", 500), _publish("b", 1500)], name="part-0.parquet")
    write_trace(
        run_dir,
        "publish",
        [_publish("c", 2500), _publish("d", 3500, "failed"), _publish("e", 3600)],
        name="part-1.parquet",
    )
    write_trace(run_dir, "delivery", [_delivery("a", 500, 10), _delivery("b", 1500, 20), _delivery("c", 2500, 40)])
    write_trace(run_dir, "leftover", [dict(message_id="e", observed_ns=T0 + 5 * S)])
    write_trace(run_dir, "event", [dict(ts_ns=T0 + 2 * S, kind="phase_start", name="slow")])
    messages = []
    summary = analyze(run_dir, spark=spark, progress=messages.append)
    return run_dir, summary, messages


def test_summary_json_is_written_and_equals_the_returned_summary(analysed):
    run_dir, summary, messages = analysed
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    assert summary["run"]["scenario"] == "tiny" and summary["run"]["status"] == "completed"
    stages = [m.rsplit(": ", 1) for m in messages if re.fullmatch(r".+: \d[\d,]*\.\d s", m)]
    names = [name for name, _ in stages]
    assert names[0] == "reading traces"  # each stage says how long it took
    # the blocks that read only the publishes and events run beside the accounting: in either order
    assert names.index("computing accounting") < names.index("computing latency statistics and throughput")
    assert "computing publish lateness, flow control and replay fidelity" in names
    assert names[-1] == "rendering summary.json and report.html"
    assert messages[0] == "traces: 10 rows, 0.0 MB of Parquet"


def test_every_message_is_accounted_for(analysed):
    m = analysed[1]["messages"]
    # a b c acked; d failed to publish; e still in the queue
    assert m == {
        "published": 5,
        "confirmed": 4,
        "acked": 3,
        "discarded": {
            "publish_nacked": 0,
            "publish_failed": 1,
            "consumer_nack_discard": 0,
            "connection_lost": 0,
            "publish_rejected_maxlen": 0,
            "unroutable": 0,
            "publish_failed_blocked": 0,
            "dead_lettered_maxlen": 0,
            "dead_lettered_expired": 0,
            "dead_lettered_rejected": 0,
            "dead_lettered_delivery_limit": 0,
            "egress_discard": 0,
            "lost_with_queue": 0,
            "channel_closed": 0,
            "consumer_reject": 0,
            "dropped_delivery_limit": 0,
        },
        "discarded_total": 1,
        "left_in_broker": 1,
        "not_yet_read": 0,
        "unaccounted": 0,
        "unaccounted_ids": [],
        "unknown_after_crash": 0,
        "unknown_after_crash_ids": [],
        "unknown_workers_missing": 0,
        "unknown_workers_missing_ids": [],
        "redelivered": 0,
        "duplicates": 0,
    }


def test_latency_statistics_exclude_the_warmup(analysed):
    summary = analysed[1]
    # a was intended at 0.5 s, inside the 1 s warm-up: only b (20 ms) and c (40 ms) count
    assert summary["sojourn_ms"] == {
        "count": 2,
        "mean": 30.0,
        "p50": 30.0,
        "p95": approx(39.0),
        "p99": approx(39.8),
        "max": 40.0,
    }
    # p95: rank 0.95 between 20 and 40 -> 20 + 0.95 * 20 = 39; p99 -> 39.8
    lat = summary["latency_ms"]
    assert lat["broker_network"]["mean"] == 5.0
    assert lat["processing"]["max"] == 20.0
    assert lat["ack_delay"]["p50"] == 1.0
    # end to end = received +5, sojourn, processing 20: b 45, c 65
    assert (lat["end_to_end"]["count"], lat["end_to_end"]["mean"]) == (2, 55.0)
    # confirms: b c e after warm-up, 2 ms each; d failed and has none
    assert (lat["confirm"]["count"], lat["confirm"]["max"]) == (3, 2.0)


def test_throughput_is_over_the_measurement_window(analysed):
    # window [1 s, 4 s) = 3 s: publishes b c d e = 4; receives b c = 2; acks b c = 2
    assert analysed[1]["throughput"] == {
        "publish_per_s": approx(4 / 3),
        "deliver_per_s": approx(2 / 3),
        "ack_per_s": approx(2 / 3),
    }


def test_phases_windows_histogram_consumers_events_and_slos(analysed):
    summary = analysed[1]
    assert [(p["phase"], p["start_s"], p["end_s"], p["published"], p["acked"]) for p in summary["phases"]] == [
        ("base", 0.0, 2.0, 2, 2),
        ("slow", 2.0, 4.0, 3, 1),
    ]
    assert [p["sojourn_ms"]["count"] for p in summary["phases"]] == [1, 1]  # a is warm-up
    assert [w["t_s"] for w in summary["windows"]] == [0, 1, 2, 3]
    assert [w["published"] for w in summary["windows"]] == [1, 1, 1, 2]
    hist = summary["sojourn_histogram"]
    assert sum(hist["counts"]) == 2 and len(hist["edges_ms"]) == len(hist["counts"]) + 1
    assert hist["edges_ms"][0] == 0.0 and hist["edges_ms"][-1] >= 40.0
    [consumer] = summary["consumers"]
    assert (consumer["delivered"], consumer["acked"]) == (3, 3)
    assert summary["events"] == [
        {"t_s": 2.0, "kind": "phase_start", "name": "slow", "source": "runner", "value": None, "detail": None}
    ]
    assert [(s["expr"], s["passed"]) for s in summary["slo"]] == [
        ("sojourn_ms.p99 < 200", True),
        ("messages.unaccounted == 0", True),
    ]


def test_a_run_without_traces_gives_empty_blocks_not_an_error(tmp_path, spark):
    _run_json(tmp_path, phases=[])
    for kind in KINDS:  # as the trace writer leaves them when the run ended before a row was written
        (tmp_path / "traces" / kind).mkdir(parents=True)
    summary = analyze(tmp_path, spark=spark)
    assert summary["messages"]["published"] == 0
    assert summary["sojourn_ms"] == {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    # nothing in a window of 3 s: rates of 0, not unknown
    assert summary["throughput"] == {"publish_per_s": 0.0, "deliver_per_s": 0.0, "ack_per_s": 0.0}
    assert summary["consumers"] == [] and summary["model"]["consumers"] == []
    assert summary["windows"] == [] and summary["sojourn_histogram"]["counts"] == [0]
    assert "NaN" not in (tmp_path / "summary.json").read_text()


def test_a_run_directory_whose_traces_were_deleted_is_an_error_before_spark_works(tmp_path, spark):
    _run_json(tmp_path, phases=[])
    with pytest.raises(MissingTracesError, match=r"traces: not found; a run directory holds run\.json and the traces/"):
        analyze(tmp_path, spark=spark)
    assert not (tmp_path / "summary.json").exists()


def test_a_trace_missing_columns_is_named_with_missing_and_present_columns(tmp_path, spark):
    _run_json(tmp_path)
    # a writer that forgot two columns: the schema without confirm_ns and outcome
    short = pa.schema([f for f in arrow_schema("publish") if f.name not in ("confirm_ns", "outcome")])
    path = tmp_path / "traces" / "publish" / "part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(short.empty_table(), path)
    with pytest.raises(TraceColumnsError) as err:
        analyze(tmp_path, spark=spark)
    assert err.value.path == str(path) and err.value.missing == ["confirm_ns", "outcome"]
    assert "message_id" in err.value.present
    assert str(path) in str(err.value) and "confirm_ns, outcome" in str(err.value)
    assert isinstance(err.value, AnalysisError)
    assert not (tmp_path / "summary.json").exists()


def test_a_batch_its_writer_did_not_convert_is_refused_until_it_is_converted(tmp_path, spark):
    from loadgen.trace.writer import CHUNKS, encode, recover, serialise, spill

    _run_json(tmp_path)
    (tmp_path / "traces" / "publish").mkdir(parents=True)
    rows = [
        (
            f"m{i}",
            "p/w/0",
            "p",
            i,
            "base",
            T0 + i * MS,
            T0 + (i + 1) * MS,
            100,
            "q",
            False,
            None,
            "sent",
            None,
            None,
            None,
            None,
        )
        for i in range(3)
    ]
    path = spill(tmp_path / "traces", "publish", 1, "run-1", "w", CHUNKS, b"".join(encode([serialise(rows)])))
    with pytest.raises(AnalysisError, match="not converted to Parquet yet") as err:
        analyze(tmp_path, spark=spark)
    assert err.value.path == str(path) and f"sojourn analyze {tmp_path}" in str(err.value)
    assert recover(tmp_path / "traces") == 3  # what `sojourn analyze` does first
    assert analyze(tmp_path, spark=spark)["messages"]["published"] == 3


def test_rows_of_another_schema_version_are_refused(tmp_path, spark, write_trace):
    _run_json(tmp_path)
    path = write_trace(tmp_path, "delivery", [dict(schema_version=99, message_id="x", receive_ns=T0)])
    with pytest.raises(SchemaVersionError, match="schema_version 99") as err:
        analyze(tmp_path, spark=spark)
    assert err.value.path == str(path)


def test_a_directory_without_run_json_is_refused(tmp_path, spark):
    with pytest.raises(RunFileError, match=r"run\.json not found"):
        analyze(tmp_path, spark=spark)


def test_a_run_that_never_started_is_refused_as_such(tmp_path, spark):
    # What `sojourn run` hands its Locust (loadgen.run.handoff) and leaves only if it was killed first.
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "status": "starting"}))
    with pytest.raises(RunFileError, match=r"run\.json: the run never started"):
        analyze(tmp_path, spark=spark)


def test_a_phase_without_an_end_in_run_json_is_refused(tmp_path, spark):
    _run_json(tmp_path, phases=[{"name": "slow", "start_s": 2.0}])
    with pytest.raises(RunFileError, match=r"phases\[0\]"):
        analyze(tmp_path, spark=spark)


def test_the_report_is_rendered_from_the_summary(analysed):
    run_dir, summary, _ = analysed
    page = (run_dir / "report.html").read_text()
    assert page.lstrip().lower().startswith("<!doctype html")
    assert summary["run"]["run_id"] in page and "tiny" in page


def _without_read_ns(version: int):
    """The delivery schema as a trace of `version` lacking read_ns (added in version 5) has it."""
    full = arrow_schema("delivery")
    fields = [f for f in full if f.name != "read_ns"]
    return pa.schema(fields, metadata={**full.metadata, b"sojourn.schema_version": str(version).encode()})


def test_a_version_4_trace_without_read_ns_is_read_with_no_socket_wait(tmp_path, spark, write_trace):
    _run_json(tmp_path, schema_version=4)
    write_trace(
        tmp_path,
        "publish",
        [dict(schema_version=4, message_id="m", intended_ns=T0 + 2 * S, publish_ns=T0 + 2 * S)],
    )
    row = dict(schema_version=4, message_id="m", publish_ns=T0 + 2 * S, receive_ns=T0 + 2 * S + 3 * MS)
    row |= dict(start_ns=T0 + 2 * S + 5 * MS, end_ns=T0 + 2 * S + 6 * MS, settle_ns=T0 + 2 * S + 6 * MS)
    write_trace(tmp_path, "delivery", [row], schema=_without_read_ns(4))
    summary = analyze(tmp_path, spark=spark)
    assert summary["messages"]["acked"] == 1
    assert summary["sojourn_ms"]["mean"] == pytest.approx(2.0)
    assert summary["latency_ms"]["socket_wait"]["count"] == 0


def test_a_version_5_trace_without_read_ns_is_refused(tmp_path, spark, write_trace):
    _run_json(tmp_path)
    path = write_trace(tmp_path, "delivery", [dict(message_id="m", receive_ns=T0)], schema=_without_read_ns(5))
    with pytest.raises(TraceColumnsError, match="read_ns") as err:
        analyze(tmp_path, spark=spark)
    assert err.value.path == str(path)


def test_the_columns_null_in_every_row_are_read_from_the_footers(tmp_path, write_trace):
    write_trace(
        tmp_path,
        "delivery",
        [dict(message_id="a", receive_ns=T0, priority=3), dict(message_id="b", receive_ns=T0, start_ns=T0)],
    )
    write_trace(tmp_path, "delivery", [dict(message_id="c", receive_ns=T0)], name="part-1.parquet")
    write_trace(
        tmp_path, "delivery", [dict(message_id="d", receive_ns=T0)], name="part-2.parquet", schema=_without_read_ns(4)
    )
    nulls = trace_files.scan(tmp_path)["delivery"].null_columns
    assert {"codel_dropping", "egress_class", "read_ns", "end_ns"} <= nulls  # read_ns: absent from part-2
    assert "priority" not in nulls and "start_ns" not in nulls  # each set in one row of one file
    assert "message_id" not in nulls and "consumer" not in nulls


def test_the_distinct_values_of_string_columns_come_from_every_file(tmp_path, write_trace):
    a = dict(message_id="a", receive_ns=T0, consumer="g/w/1", phase="slow", egress_class="gold")
    b = dict(message_id="b", receive_ns=T0, consumer="g/w/0")
    write_trace(tmp_path, "delivery", [a, b])
    c = dict(message_id="c", receive_ns=T0, consumer="g/w/1", phase="busy")
    write_trace(tmp_path, "delivery", [c], name="part-1.parquet")
    d = dict(message_id="d", receive_ns=T0, consumer="h/w/0")
    path = write_trace(tmp_path, "delivery", [d], name="part-2.parquet")
    pq.write_table(pq.read_table(path), path, use_dictionary=False)  # a writer that left out the dictionary
    kind = trace_files.scan(tmp_path)["delivery"]
    assert trace_files.distinct_values(kind, ["consumer", "phase", "egress_class", "worker"]) == {
        "consumer": ["g/w/0", "g/w/1", "h/w/0"],
        "phase": ["base", "busy", "slow"],  # base: the rows' default
        "egress_class": ["gold"],  # null is no value
        "worker": ["w:1"],  # every row's
    }


def test_coded_columns_read_back_as_their_strings(spark):
    rows = local_rows(spark, [("b", 1), (None, 2), ("a", 3), ("b", 4)], "name string, n int")
    values = {"name": ["a", "b"]}
    codes = rows.transform(encoded(values))
    assert [tuple(r) for r in codes.orderBy("n").collect()] == [(1, 1), (None, 2), (0, 3), (1, 4)]
    assert dict(codes.dtypes)["name"] == "int"
    assert codes.transform(decoded(values)).orderBy("n").collect() == rows.orderBy("n").collect()
    with pytest.raises(Exception, match="name: a value not in its dictionary: b"):
        rows.transform(encoded({"name": ["a"]})).collect()


def test_a_file_without_statistics_vouches_for_no_null_column(tmp_path, write_trace):
    path = write_trace(tmp_path, "delivery", [dict(message_id="a", receive_ns=T0)])
    pq.write_table(pq.read_table(path), path, write_statistics=False)
    assert trace_files.scan(tmp_path)["delivery"].null_columns == set()


def test_the_footers_say_which_columns_hold_a_value(tmp_path, write_trace):
    """A priority in some publish is read from the footers (no query asks whether the run has one);
    a file without statistics says nothing either way."""
    rows = [
        dict(message_id="a", intended_ns=T0, publish_ns=T0),
        dict(message_id="b", intended_ns=T0, publish_ns=T0, priority=5),
    ]
    path = write_trace(tmp_path, "publish", rows)
    found = trace_files.scan(tmp_path)["publish"]
    assert "priority" in found.valued_columns and "priority" not in found.null_columns
    assert "blocked_ms" in found.null_columns and "blocked_ms" not in found.valued_columns
    pq.write_table(pq.read_table(path), path, write_statistics=False)
    assert trace_files.scan(tmp_path)["publish"].valued_columns == set()


def test_columns_null_in_every_row_give_the_summary_they_give_cached(analysed, spark, monkeypatch):
    """The job caches the deliveries without the columns null in every row and puts them back as
    null literals: the same summary as caching them."""
    run_dir, summary, _ = analysed
    nulls = trace_files.scan(run_dir)["delivery"].null_columns
    assert {"codel_dropping", "priority", "egress_class", "read_ns"} <= nulls  # read by some block
    given = []
    monkeypatch.setattr(job, "summarize", lambda *a, **kw: given.append(kw["delivery_nulls"]) or summarize(*a, **kw))
    assert json.loads(json.dumps(analyze(run_dir, spark=spark))) == summary
    assert given == [nulls]  # the job passes what the footers say
    frames, run = read_traces(spark, run_dir), load_run_json(run_dir)
    cached = summarize(frames, run, delivery_nulls=())
    assert json.loads(json.dumps({**cached, "slo": summary["slo"]}, allow_nan=False)) == summary


def test_a_column_given_as_null_in_every_row_is_read_as_null(analysed, spark):
    """delivery_nulls is what the job believes: a column named there is not read (here wrongly
    named, so the sojourn, from start_ns, has nothing to count)."""
    run_dir, summary, _ = analysed
    assert summary["sojourn_ms"]["count"] == 2  # b and c; a is in the warm-up
    wrong = summarize(read_traces(spark, run_dir), load_run_json(run_dir), delivery_nulls={"start_ns"})
    assert wrong["sojourn_ms"]["count"] == 0
