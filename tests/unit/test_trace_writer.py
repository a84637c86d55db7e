"""The batched Parquet trace writer: what lands on disk, and when."""
from pathlib import Path

import pyarrow.parquet as pq

from analysis.schema import SCHEMA_VERSION
from loadgen.trace import TraceWriter


def _event(i: int) -> tuple:
    return (1_000 + i, "phase_start", "runner", f"p{i}", None, None)


def test_nothing_is_written_until_a_flush_and_everything_after(tmp_path: Path):
    w = TraceWriter(tmp_path, "run-1", "host-7")
    for i in range(3):
        w.append("event", _event(i))
    assert list((tmp_path / "traces" / "event").iterdir()) == []
    w.flush()
    (part,) = (tmp_path / "traces" / "event").glob("*.parquet")
    rows = pq.read_table(part).to_pylist()
    assert [r["name"] for r in rows] == ["p0", "p1", "p2"]
    assert {(r["schema_version"], r["run_id"], r["worker"]) for r in rows} == {(SCHEMA_VERSION, "run-1", "host-7")}


def test_a_full_batch_is_written_as_its_own_part_without_waiting(tmp_path: Path):
    w = TraceWriter(tmp_path, "r", "w", max_rows=2)
    for i in range(5):
        w.append("event", _event(i))
    parts = sorted((tmp_path / "traces" / "event").glob("*.parquet"))
    assert len(parts) == 2 and w.pending() == 1
    w.close()
    total = sum(pq.read_table(p).num_rows for p in (tmp_path / "traces" / "event").glob("*.parquet"))
    assert total == 5


def test_close_is_idempotent_and_leaves_no_temporary_files(tmp_path: Path):
    w = TraceWriter(tmp_path, "r", "w")
    w.append("leftover", ("m-1", "q", 5, False))
    w.close()
    w.close()
    files = [p.name for p in (tmp_path / "traces" / "leftover").iterdir()]
    assert len(files) == 1 and files[0].endswith(".parquet") and not files[0].startswith(".")


def test_flush_can_run_the_write_elsewhere(tmp_path: Path):
    ran = []
    w = TraceWriter(tmp_path, "r", "w")
    w.append("event", _event(0))
    w.flush(run_in=lambda fn: ran.append(fn()))
    assert len(ran) == 1 and w.rows_written["event"] == 1


def test_a_full_batch_is_handed_to_the_offload_instead_of_written_by_the_appender(tmp_path: Path):
    handed: list = []
    w = TraceWriter(tmp_path, "r", "w", max_rows=2, offload=handed.append)
    w.append("event", _event(0))
    w.append("event", _event(1))  # full: handed off, the appender does not write
    assert len(handed) == 1 and list((tmp_path / "traces" / "event").glob("*.parquet")) == []
    handed[0]()  # the thread pool runs it
    (part,) = (tmp_path / "traces" / "event").glob("*.parquet")
    assert pq.read_table(part).num_rows == 2
