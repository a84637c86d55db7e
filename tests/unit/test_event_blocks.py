"""The blocks computed from the events' rows on the driver (analysis.events): the timeline, the
accounting's inputs, the queue samples and depth, and the events read from Parquet by pyarrow."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from analysis import schema, traces
from analysis.events.accounting import accounting_inputs
from analysis.events.queue import queue_depth, queue_samples, sampling
from analysis.events.timeline import timeline

S = 1_000_000_000
T0 = 1_000 * S


def event(kind, t_s, source="runner", name="", value=None, detail=None):
    return dict(
        schema_version=schema.SCHEMA_VERSION,
        run_id="r",
        worker="w:1",
        ts_ns=T0 + int(t_s * S),
        kind=kind,
        source=source,
        name=name,
        value=value,
        detail=None if detail is None else json.dumps(detail),
    )


def sample(t_s, ready, detail):
    return event("queue_sample", t_s, "sampler", "q", float(ready), detail)


def test_the_timeline_is_in_time_order_without_the_samples_and_capped():
    events = [
        event("phase_start", 2, name="busy"),
        sample(1, 5, {"took_ms": 1}),
        event("consumer_join", 1, "c/w/0", name="c/w/0"),
        event("consumer_join", 1, "b/w/0", name="b/w/0"),  # same time and kind: by name
        event("phase_start", 0, name="base"),
    ]
    rows, more = timeline(events, T0, 10)
    assert [(r["t_s"], r["kind"], r["name"]) for r in rows] == [
        (0.0, "phase_start", "base"),
        (1.0, "consumer_join", "b/w/0"),
        (1.0, "consumer_join", "c/w/0"),
        (2.0, "phase_start", "busy"),
    ]
    assert list(rows[0]) == ["t_s", "kind", "name", "source", "value", "detail"] and not more
    two, more = timeline(events, T0, 2)
    assert [r["name"] for r in two] == ["base", "b/w/0"] and more


def test_the_accounting_takes_each_producers_last_loss_the_last_restart_and_whether_an_id_came_back():
    events = [
        event("connection_lost", 3, "p/w/0"),
        event("connection_lost", 9, "p/w/0"),
        event("connection_lost", 5, "p/w/1"),
        event("broker_restart", 4),
        event("broker_restart", 7),
        event("publish_returned", 6, "p/w/0", name=""),  # an empty name is still a name
    ]
    inputs = accounting_inputs(events)
    assert inputs.losses == {"p/w/0": T0 + 9 * S, "p/w/1": T0 + 5 * S}
    assert inputs.restart_ns == T0 + 7 * S and inputs.returned_events
    assert accounting_inputs([event("phase_start", 0)]) == ({}, None, False)


def test_queue_samples_read_their_detail_and_give_the_depth_in_time_order():
    events = [
        sample(2, 7, {"unacked": 3, "consumers": 2, "source": "management", "took_ms": 4.5}),
        sample(1, 5, {"unacked": None, "consumers": "3", "took_ms": 1.5}),
        sample(3, 2.9, "not an object"),
        event("phase_start", 1.5),
    ]
    samples = queue_samples(events)
    assert queue_depth(samples, T0) == [
        {"t_s": 1.0, "ready": 5, "unacked": None, "consumers": 3},
        {"t_s": 2.0, "ready": 7, "unacked": 3, "consumers": 2},
        {"t_s": 3.0, "ready": 2, "unacked": None, "consumers": None},  # a fraction is cut off
    ]
    # the median is a sample's own value: the 2nd smallest of two
    assert sampling(samples) == {"samples": 3, "source": "management", "sample_took_ms": {"p50": 1.5, "max": 4.5}}
    assert sampling([])["sample_took_ms"] == {"p50": None, "max": None}


def test_events_are_read_from_every_part_file_in_order(tmp_path):
    directory = tmp_path / "traces" / "event"
    directory.mkdir(parents=True)
    rows = [event("phase_start", 0, name="base"), sample(1, 4, {"took_ms": 2}), event("phase_end", 2, name="base")]
    table = pa.Table.from_pylist(rows, schema=schema.arrow_schema("event"))
    pq.write_table(table.slice(0, 2), directory / "part-0.parquet")
    pq.write_table(table.slice(2), directory / "part-1.parquet")
    assert traces.read_table(traces.scan(tmp_path)["event"]).to_pylist() == rows


def test_a_small_kind_is_one_table_of_the_schemas_columns_in_file_order(tmp_path):
    directory = tmp_path / "traces" / "leftover"
    directory.mkdir(parents=True)
    common = {"schema_version": schema.SCHEMA_VERSION, "run_id": "r", "worker": "w", "queue": "q"}
    first = [{**common, "message_id": "a", "observed_ns": 5, "redelivered": False}]
    second = [{**common, "message_id": "b", "observed_ns": 6, "redelivered": True}]
    # a file of an older writer that did not know the `redelivered` column: it reads as null
    pq.write_table(pa.Table.from_pylist(first, schema=schema.arrow_schema("leftover")), directory / "part-0.parquet")
    pq.write_table(pa.Table.from_pylist(second).drop(["redelivered"]), directory / "part-1.parquet")
    found = traces.KindFiles("leftover", (directory / "part-0.parquet", directory / "part-1.parquet"), 2, (0, 0), ())
    table = traces.read_table(found)
    assert table.column_names == schema.arrow_schema("leftover").names
    assert table.to_pylist() == [*first, {**second[0], "redelivered": None}]


def test_a_kind_without_files_is_an_empty_table_with_every_column(tmp_path):
    (tmp_path / "traces").mkdir()
    table = traces.read_table(traces.scan(tmp_path)["deadletter"])
    assert table.num_rows == 0
    assert table.schema.names == schema.arrow_schema("deadletter").names
