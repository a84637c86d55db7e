"""Replay files written by loadgen.replay.writer: what is on disk, and what the reader gets back."""

from __future__ import annotations

import csv
import datetime
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from loadgen.commands.record import binding_keys, firehose_row
from loadgen.replay.writer import TraceFileError, TraceFileWriter, headers_json, write_trace

try:
    from loadgen.replay.source import load_trace
except ImportError:  # the reader lands separately; the on-disk checks below still run
    load_trace = None

ROWS = [
    {
        "offset_s": 0.0,
        "size_bytes": 10,
        "routing_key": "orders.a",
        "exchange": "",
        "priority": None,
        "headers": None,
        "payload_b64": "aGVsbG8=",
    },
    {
        "offset_s": 0.0201234567,
        "size_bytes": 2048,
        "routing_key": "orders.b",
        "exchange": "amq.topic",
        "priority": 7,
        "headers": {"seq": 1, "tag": "é", "nested": {"ok": True}},
        "payload_b64": None,
    },
    {
        "offset_s": 1.5,
        "size_bytes": 0,
        "routing_key": "orders.a",
        "exchange": "",
        "priority": 0,
        "headers": {},
        "payload_b64": None,
    },
]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_every_format_reads_back_with_the_replay_reader(tmp_path: Path, suffix: str):
    if load_trace is None:
        pytest.skip("loadgen.replay.source.load_trace is not there yet")
    path = tmp_path / f"rec{suffix}"
    assert write_trace(path, ROWS) == 3
    trace = load_trace(path)
    assert trace.offset_s == pytest.approx((0.0, 0.020123, 1.5), abs=1e-9)  # 6 decimals kept
    assert trace.size_bytes == (10, 2048, 0)
    assert trace.routing_key == ("orders.a", "orders.b", "orders.a")
    assert trace.priority == (None, 7, 0)
    assert trace.headers == (None, {"seq": 1, "tag": "é", "nested": {"ok": True}}, None)  # {} = no headers
    assert trace.payload == (b"hello", None, None)


def test_csv_has_a_header_row_six_decimals_and_empty_cells_for_absent_values(tmp_path: Path):
    path = tmp_path / "rec.csv"
    write_trace(path, [{k: v for k, v in r.items() if k != "payload_b64"} for r in ROWS])
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["offset_s", "size_bytes", "routing_key", "exchange", "priority", "headers"]
    assert rows[1] == ["0.000000", "10", "orders.a", "", "", ""]
    assert rows[2][0] == "0.020123" and rows[2][4] == "7"
    assert json.loads(rows[2][5]) == {"seq": 1, "tag": "é", "nested": {"ok": True}}


def test_jsonl_omits_absent_values(tmp_path: Path):
    path = tmp_path / "rec.jsonl"
    write_trace(path, ROWS)
    first, second, _third = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    assert first == {
        "offset_s": 0.0,
        "size_bytes": 10,
        "routing_key": "orders.a",
        "exchange": "",
        "payload_b64": "aGVsbG8=",
    }
    assert "payload_b64" not in second and json.loads(second["headers"])["seq"] == 1


def test_parquet_is_written_in_row_groups_and_closed_on_an_exception(tmp_path: Path):
    path = tmp_path / "rec.parquet"
    with pytest.raises(RuntimeError), TraceFileWriter(path, row_group_rows=2) as writer:
        for i in range(5):
            writer.append({"offset_s": i / 10, "size_bytes": i, "routing_key": "k", "exchange": ""})
        raise RuntimeError("Ctrl-C, say")
    assert pq.ParquetFile(path).num_row_groups == 3
    assert [r["size_bytes"] for r in pq.read_table(path).to_pylist()] == [0, 1, 2, 3, 4]


def test_csv_rows_reach_the_file_on_flush_before_close(tmp_path: Path):
    path = tmp_path / "rec.csv"
    writer = TraceFileWriter(path)
    writer.append({"offset_s": 0.5, "size_bytes": 3, "routing_key": "k", "exchange": ""})
    writer.flush()
    assert path.read_text().splitlines()[1] == "0.500000,3,k,,,"
    writer.close()
    writer.close()  # twice is fine


def test_an_unknown_extension_is_refused_before_any_file_is_made(tmp_path: Path):
    with pytest.raises(TraceFileError, match=r"rec\.txt: unknown replay file extension '\.txt'"):
        TraceFileWriter(tmp_path / "rec.txt")
    assert not (tmp_path / "rec.txt").exists()


def test_an_unwritable_path_names_the_path(tmp_path: Path):
    with pytest.raises(TraceFileError, match=r"no-such-dir/rec\.csv: can not write"):
        TraceFileWriter(tmp_path / "no-such-dir" / "rec.csv")


def test_a_row_with_an_unknown_column_or_a_bad_number_is_refused_with_its_name(tmp_path: Path):
    with TraceFileWriter(tmp_path / "rec.csv") as writer:
        with pytest.raises(TraceFileError, match=r"unexpected column.*'colour'"):
            writer.append({"offset_s": 0, "size_bytes": 1, "routing_key": "", "exchange": "", "colour": "red"})
        with pytest.raises(TraceFileError, match="size_bytes='big' is not a number"):
            writer.append({"offset_s": 0, "size_bytes": "big", "routing_key": "", "exchange": ""})


def test_write_trace_adds_optional_columns_only_when_a_row_has_them(tmp_path: Path):
    without = tmp_path / "a.csv"
    write_trace(without, [{"offset_s": 0, "size_bytes": 1, "routing_key": "k", "exchange": ""}])
    assert "payload_b64" not in without.read_text().splitlines()[0]
    with_pt = tmp_path / "b.csv"
    write_trace(with_pt, [{"offset_s": 0, "size_bytes": 1, "routing_key": "k", "exchange": "", "processing_ms": 4}])
    assert with_pt.read_text().splitlines()[0].endswith(",processing_ms")


def test_amqp_header_types_without_a_json_form_become_text():
    text = headers_json({"raw": b"\xff\x00ab", "at": datetime.datetime(2026, 1, 2, 3, 4, 5)})
    assert json.loads(text) == {"raw": "\\xff\x00ab", "at": "2026-01-02T03:04:05"}
    assert headers_json({}) is None and headers_json(None) is None


def test_a_firehose_copy_becomes_a_row_with_the_original_key_and_properties():
    # as the broker sends it: routing_keys = the publish's key, then the CC keys
    headers = {
        "exchange_name": "amq.topic",
        "routing_keys": ["orders.a", "audit"],
        "properties": {"priority": 3, "headers": {"CC": ["audit"], "n": 1}},
        "node": "rabbit@h",
        "vhost": "/",
        "channel": 1,
        "user": "guest",
        "connection": "c",
    }
    row = firehose_row(headers, b"abcd", 1.25, payloads=True)
    assert row == {
        "offset_s": 1.25,
        "size_bytes": 4,
        "routing_key": "orders.a",
        "exchange": "amq.topic",
        "priority": 3,
        "headers": '{"CC":["audit"],"n":1}',
        "payload_b64": "YWJjZA==",
    }
    bare = firehose_row({"exchange_name": "", "routing_keys": ["q"], "properties": {}}, b"", 0.0, payloads=False)
    assert bare == {
        "offset_s": 0.0,
        "size_bytes": 0,
        "routing_key": "q",
        "exchange": "",
        "priority": None,
        "headers": None,
    }


def test_binding_keys_cover_every_exchange_or_only_the_named_ones():
    assert binding_keys(()) == ["publish.#"]
    assert binding_keys(("amq.topic", "", "amq.topic")) == ["publish.amq.topic", "publish."]
