"""Replay sources: what each format reads into a ReplayTrace, and how a bad file is reported."""

from __future__ import annotations

import base64
import json
import statistics
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.schema import SCHEMA_VERSION, arrow_schema
from loadgen.replay import ReplayFileError, load_trace

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> ReplayFileError:
    with pytest.raises(ReplayFileError) as info:
        load_trace(path)
    return info.value


# --- CSV --------------------------------------------------------------------------------------


def test_csv_rows_are_sorted_by_time_and_made_relative_to_the_earliest(tmp_path: Path):
    f = _write(tmp_path / "t.csv", "offset_s,size_bytes,routing_key\n12.5,30,c\n10.0,10,a\n11.0,20,b\n")
    trace = load_trace(f)
    assert trace.format == "csv" and trace.path == str(f) and len(trace) == 3
    assert trace.offset_s == (0.0, 1.0, 2.5)
    assert trace.size_bytes == (10, 20, 30)
    assert trace.routing_key == ("a", "b", "c")


def test_rows_at_the_same_time_keep_their_file_order(tmp_path: Path):
    f = _write(tmp_path / "t.csv", "offset_s,size_bytes,routing_key\n1,1,x\n0,2,y\n1,3,z\n0,4,w\n")
    trace = load_trace(f)
    assert trace.routing_key == ("y", "w", "x", "z")


def test_csv_empty_cells_are_absent_and_optional_columns_are_parsed(tmp_path: Path):
    f = _write(
        tmp_path / "t.csv",
        "offset_s,size_bytes,routing_key,priority,processing_ms,headers,exchange\n"
        "0,5,,,,,ex\n"
        '0.25,6,k,9,2.5,"{""tenant"": ""a""}",\n',
    )
    trace = load_trace(f)
    assert trace.routing_key == (None, "k")
    assert trace.priority == (None, 9)
    assert trace.processing_ms == (None, 2.5)
    assert trace.headers == (None, {"tenant": "a"})
    assert trace.payload == (None, None)
    assert trace.ignored_columns == ()  # exchange is known, just not used


def test_unknown_columns_are_ignored_but_listed(tmp_path: Path):
    f = _write(tmp_path / "t.csv", "offset_s,user,size_bytes,colour\n0,bob,1,red\n")
    trace = load_trace(f)
    assert trace.ignored_columns == ("user", "colour")
    assert trace.size_bytes == (1,)


def test_offset_ms_is_read_as_milliseconds(tmp_path: Path):
    f = _write(tmp_path / "t.csv", "offset_ms,size_bytes\n1500,1\n250,1\n")
    assert load_trace(f).offset_s == (0.0, 1.25)


def test_timestamps_may_be_iso_with_offset_or_z_naive_utc_or_epoch_seconds(tmp_path: Path):
    # 1704067200 is 2024-01-01T00:00:00Z
    f = _write(
        tmp_path / "t.csv",
        "timestamp,size_bytes\n"
        "2024-01-01T00:00:00Z,1\n"
        "2024-01-01T02:00:01+02:00,2\n"
        "2024-01-01T00:00:02.5,3\n"
        "1704067203.25,4\n",
    )
    trace = load_trace(f)
    assert trace.size_bytes == (1, 2, 3, 4)
    assert trace.offset_s == pytest.approx((0.0, 1.0, 2.5, 3.25), abs=1e-6)


def test_a_quoted_cell_spanning_lines_counts_physical_lines(tmp_path: Path):
    f = _write(tmp_path / "t.csv", 'offset_s,size_bytes,headers\n0,1,"{""a"":\n1}"\n1,-4,\n')
    err = _error(f)
    assert str(err) == f"{f}: line 4, column 'size_bytes': '-4' is not a whole number >= 0"


# --- CSV errors: each names the file, the line (the header is line 1), the column and value ----


def test_a_bad_size_names_file_line_column_and_value(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "offset_s,size_bytes\n0,1\n0.1,2\n0.2,abc\n")
    err = _error(f)
    assert str(err) == f"{f}: line 4, column 'size_bytes': 'abc' is not a whole number >= 0"
    assert (err.path, err.where, err.column, err.value) == (str(f), "line 4", "size_bytes", "abc")


@pytest.mark.parametrize(
    ("column", "cell", "complaint"),
    [
        ("priority", "256", "'256' is not a whole number from 0 to 255"),
        ("priority", "high", "'high' is not a whole number from 0 to 255"),
        ("processing_ms", "-1", "'-1' is not a number >= 0"),
        ("processing_ms", "nan", "'nan' is not a number >= 0"),
        ("headers", "[1]", "'[1]' is not a JSON object"),
        ("headers", "{oops", "'{oops' is not valid JSON (Expecting property name enclosed in double quotes)"),
        ("payload_b64", "!!!", "'!!!' is not valid base64"),
    ],
)
def test_each_bad_optional_value_is_reported_with_its_column(tmp_path: Path, column, cell, complaint):
    f = _write(tmp_path / "x.csv", f"offset_s,size_bytes,{column}\n0,1,\n0,1,{cell}\n")
    assert str(_error(f)) == f"{f}: line 3, column '{column}': {complaint}"


def test_a_routing_key_the_broker_would_refuse_is_reported(tmp_path: Path):
    f = _write(tmp_path / "x.csv", f"offset_s,size_bytes,routing_key\n0,1,{'k' * 255}\n0,1,{'k' * 256}\n")
    text = str(_error(f))
    assert text.startswith(f"{f}: line 3, column 'routing_key': 'kkkk")
    assert "is not a routing key the broker takes: expected at most 255 bytes, got 256 bytes of UTF-8" in text


def test_a_size_beyond_the_scenarios_own_cap_is_refused(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "offset_s,size_bytes\n0,134217728\n0,99999999999\n")  # 128 MiB passes
    assert str(_error(f)) == (
        f"{f}: line 3, column 'size_bytes': '99999999999' is larger than 134,217,728 bytes (128 MiB), "
        "the largest body sojourn sends"
    )


def test_a_bad_time_is_reported(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "timestamp,size_bytes\n2024-01-01T00:00:00Z,1\nyesterday,1\n")
    assert str(_error(f)) == (
        f"{f}: line 3, column 'timestamp': 'yesterday' is not an ISO-8601 timestamp or a number of epoch seconds"
    )


def test_a_row_without_time_is_reported(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "offset_s,size_bytes\n0,1\n,1\n")
    assert str(_error(f)) == f"{f}: line 3, column 'offset_s': missing: every row needs a time"


def test_a_row_without_size_or_payload_is_reported(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "offset_s,size_bytes,payload_b64\n0,1,\n1,,\n")
    assert str(_error(f)) == f"{f}: line 3, column 'size_bytes': missing: give size_bytes or payload_b64"


def test_a_row_with_the_wrong_number_of_fields_is_reported(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "offset_s,size_bytes\n0,1\n1,2,3\n")
    assert str(_error(f)) == f"{f}: line 3: 3 fields, the header has 2"


def test_no_time_column_names_the_columns_found(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "time,size_bytes\n0,1\n")
    assert str(_error(f)) == (
        f"{f}: no time column: give exactly one of offset_s, offset_ms, timestamp (columns found: time, size_bytes)"
    )


def test_two_time_columns_are_refused(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "offset_s,timestamp,size_bytes\n0,0,1\n")
    assert str(_error(f)) == (
        f"{f}: 2 time columns: give exactly one of offset_s, offset_ms, timestamp "
        f"(columns found: offset_s, timestamp, size_bytes)"
    )


def test_a_file_without_size_or_payload_columns_is_refused(tmp_path: Path):
    f = _write(tmp_path / "x.csv", "offset_s,routing_key\n0,a\n")
    assert str(_error(f)) == (
        f"{f}: no size_bytes column (needed unless payload_b64 is given; columns found: offset_s, routing_key)"
    )


def test_an_empty_file_and_a_header_without_rows_are_refused(tmp_path: Path):
    empty = _write(tmp_path / "empty.csv", "")
    assert str(_error(empty)) == f"{empty}: empty file: no header row and no rows"
    header_only = _write(tmp_path / "h.csv", "offset_s,size_bytes\n")
    assert str(_error(header_only)) == f"{header_only}: no rows"


def test_an_unknown_extension_names_the_accepted_ones(tmp_path: Path):
    f = _write(tmp_path / "x.tsv", "offset_s\tsize_bytes\n")
    assert str(_error(f)) == (
        f"{f}: unknown replay file type '.tsv'; accepted: .csv, .jsonl, .ndjson, .parquet, or a sojourn run directory"
    )


# --- JSONL ------------------------------------------------------------------------------------


def test_jsonl_reads_objects_nulls_headers_and_payloads(tmp_path: Path):
    body = b"hello\x00world"
    lines = [
        {"offset_s": 2.0, "size_bytes": 3, "headers": '{"a": 1}', "routing_key": None},
        "",
        {"offset_s": 1.0, "payload_b64": base64.b64encode(body).decode(), "headers": {"b": [2]}},
        {"offset_s": 1.5, "payload_b64": base64.b64encode(body).decode(), "size_bytes": 100, "note": "x"},
    ]
    f = _write(tmp_path / "t.ndjson", "\n".join(json.dumps(x) if x else "" for x in lines) + "\n")
    trace = load_trace(f)
    assert trace.format == "jsonl"
    assert trace.offset_s == (0.0, 0.5, 1.0)
    assert trace.size_bytes == (len(body), 100, 3)  # payload length, unless size_bytes is given
    assert trace.payload == (body, body, None)
    assert trace.headers == ({"b": [2]}, None, {"a": 1})
    assert trace.routing_key == (None, None, None)
    assert trace.ignored_columns == ("note",)


def test_jsonl_an_unparseable_line_is_reported_with_its_number(tmp_path: Path):
    f = _write(tmp_path / "t.jsonl", '{"offset_s": 0, "size_bytes": 1}\n\n{"offset_s": 1, size_bytes: 2}\n')
    err = _error(f)
    assert str(err).startswith(f"{f}: line 3: not valid JSON: Expecting property name")
    assert err.where == "line 3"


def test_jsonl_a_line_that_is_not_an_object_is_reported(tmp_path: Path):
    f = _write(tmp_path / "t.jsonl", '{"offset_s": 0, "size_bytes": 1}\n[1, 2]\n')
    assert str(_error(f)) == f"{f}: line 2: [1, 2] is not a JSON object"


def test_jsonl_values_of_the_wrong_type_are_reported(tmp_path: Path):
    f = _write(tmp_path / "t.jsonl", '{"offset_s": 0, "size_bytes": true}\n')
    assert str(_error(f)) == f"{f}: line 1, column 'size_bytes': True is not a whole number >= 0"
    g = _write(
        tmp_path / "u.jsonl", '{"offset_s": 0, "size_bytes": 1}\n{"offset_s": 0, "size_bytes": 1, "routing_key": 7}\n'
    )
    assert str(_error(g)) == f"{g}: line 2, column 'routing_key': 7 is not a string"
    h = _write(tmp_path / "v.jsonl", '{"offset_s": 0, "size_bytes": 1, "headers": "[]"}\n')
    assert str(_error(h)) == f"{h}: line 1, column 'headers': '[]' is not a JSON object"


def test_jsonl_time_columns_are_found_across_all_lines(tmp_path: Path):
    f = _write(tmp_path / "t.jsonl", '{"offset_s": 0, "size_bytes": 1}\n{"offset_ms": 5, "size_bytes": 1}\n')
    assert str(_error(f)).startswith(f"{f}: 2 time columns:")


# --- Parquet ----------------------------------------------------------------------------------


def test_parquet_reads_native_timestamps_and_json_headers(tmp_path: Path):
    f = tmp_path / "t.parquet"
    ns = 1_704_067_200_000_000_000
    pq.write_table(
        pa.table(
            {
                "timestamp": pa.array([ns + 2_001_000_000, ns], pa.timestamp("ns", tz="UTC")),
                "size_bytes": pa.array([7, 8], pa.int64()),
                "routing_key": ["k2", "k1"],
                "priority": pa.array([None, 3], pa.int32()),
                "headers": [None, '{"x": "y"}'],
                "extra": [1, 2],
            }
        ),
        f,
    )
    trace = load_trace(f)
    assert trace.format == "parquet"
    assert trace.offset_s == pytest.approx((0.0, 2.001), abs=1e-6)  # epoch floats: ~0.2 us resolution
    assert trace.size_bytes == (8, 7)
    assert trace.priority == (3, None)
    assert trace.headers == ({"x": "y"}, None)
    assert trace.ignored_columns == ("extra",)


def test_parquet_a_bad_value_names_the_zero_based_row(tmp_path: Path):
    f = tmp_path / "t.parquet"
    pq.write_table(pa.table({"offset_s": [0.0, 1.0, 2.0], "size_bytes": [1, -2, 3]}), f)
    assert str(_error(f)) == f"{f}: row 1, column 'size_bytes': -2 is not a whole number >= 0"


# --- a sojourn run directory ------------------------------------------------------------------

_PUBLISH_DEFAULTS = dict(
    schema_version=SCHEMA_VERSION,
    run_id="r",
    worker="w",
    producer_group="g",
    phase="base",
    publish_ns=0,
    persistent=False,
    confirm_ns=None,
    outcome="confirmed",
    priority=None,
    replay_index=None,
    replay_loop=None,
)
_DELIVERY_DEFAULTS = dict(
    schema_version=SCHEMA_VERSION,
    run_id="r",
    worker="w",
    consumer="c",
    consumer_group="cg",
    phase="base",
    delivery_tag=1,
    redelivered=False,
    publish_ns=None,
    receive_ns=0,
    start_ns=None,
    settle_ns=None,
    prefetch=10,
    buffer_len=0,
    size_bytes=1,
    codel_dropping=None,
    codel_count=None,
    codel_first_above_ns=None,
    codel_drop_next_ns=None,
)


def _publish(message_id, producer, seq, intended_ns, size, key, **more):
    return {
        **_PUBLISH_DEFAULTS,
        "message_id": message_id,
        "producer": producer,
        "seq": seq,
        "intended_ns": intended_ns,
        "size_bytes": size,
        "routing_key": key,
        **more,
    }


def _delivery(message_id, outcome, processing_ms, end_ns):
    return {
        **_DELIVERY_DEFAULTS,
        "message_id": message_id,
        "outcome": outcome,
        "processing_ms": processing_ms,
        "end_ns": end_ns,
    }


def _parts(directory: Path, kind: str, *parts: list[dict], drop: tuple[str, ...] = ()) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    schema = arrow_schema(kind)
    for rows in parts:
        table = pa.Table.from_pylist(rows, schema=schema)
        seq = len(list(directory.iterdir()))
        pq.write_table(table.drop_columns(list(drop)), directory / f"part-w-{seq:06d}.parquet")


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "run.json").write_text("{}")
    return run


def test_a_run_directory_replays_its_publishes_at_their_intended_times(tmp_path: Path):
    run = _run_dir(tmp_path)
    t0 = 1_700_000_000_000_000_000
    _parts(
        run / "traces" / "publish",
        "publish",
        [
            _publish("m3", "g/0/1", 0, t0 + 500_000_000, 30, "b", priority=4),
            _publish("m1", "g/0/0", 0, t0, 10, "a", outcome="failed"),
        ],
        [_publish("m2", "g/0/0", 1, t0 + 500_000_000, 20, "a")],
    )
    # An older part file, from before publishes carried priority.
    _parts(
        run / "traces" / "publish",
        "publish",
        [_publish("m4", "g/0/0", 2, t0 + 1_250_000_000, 40, "a")],
        drop=("priority",),
    )
    _parts(
        run / "traces" / "delivery",
        "delivery",
        [
            _delivery("m1", "nack_requeue", 9.0, 100),  # not processed: does not count
            _delivery("m1", "ack", 2.0, 300),
            _delivery("m2", "auto_ack", 7.5, 50),
        ],
        [
            _delivery("m1", "ack", 1.0, 200),  # the first processed delivery of m1
            _delivery(None, "ack", 5.0, 10),  # a foreign message
            _delivery("m3", "nack_discard", 4.0, 10),
        ],
    )
    trace = load_trace(run)
    assert trace.format == "run" and len(trace) == 4
    # sorted by (intended_ns, producer, seq): m1; then m2 (g/0/0) before m3 (g/0/1) at the same time; m4
    assert trace.offset_s == (0.0, 0.5, 0.5, 1.25)
    assert trace.size_bytes == (10, 20, 30, 40)
    assert trace.routing_key == ("a", "a", "b", "a")
    assert trace.priority == (None, None, 4, None)
    assert trace.processing_ms == (1.0, 7.5, None, None)
    assert trace.headers == (None,) * 4 and trace.payload == (None,) * 4


def test_a_directory_that_is_not_a_run_is_refused(tmp_path: Path):
    bare = tmp_path / "bare"
    bare.mkdir()
    assert str(_error(bare)) == f"{bare}: not a sojourn run directory: no run.json"
    run = _run_dir(tmp_path)
    assert str(_error(run)) == f"{run}: not a sojourn run directory: no traces/publish/*.parquet"


def test_a_run_publish_part_missing_a_column_is_named(tmp_path: Path):
    run = _run_dir(tmp_path)
    _parts(run / "traces" / "publish", "publish", [_publish("m1", "p", 0, 1, 1, "a")], drop=("intended_ns",))
    err = _error(run)
    assert err.path.endswith("part-w-000000.parquet")
    assert "missing column(s) intended_ns" in str(err)


# --- the shipped sample -----------------------------------------------------------------------


def test_the_sample_trace_loads_and_has_bursts():
    trace = load_trace(ROOT / "scenarios" / "traces" / "burst-sample.csv")
    assert 55.0 <= trace.offset_s[-1] < 60.0
    per_second = Counter(int(t) for t in trace.offset_s)
    rates = [per_second.get(s, 0) for s in range(60)]
    assert max(rates) >= 5 * statistics.median(rates)
    assert len(set(trace.routing_key)) == 4 and trace.ignored_columns == ()
    assert all(p is None or 0 <= p <= 5 for p in trace.priority)
    assert all(ms is not None for ms in trace.processing_ms)
    assert max(trace.size_bytes) <= 16 * 1024
