"""The batched Parquet trace writer: what lands on disk, and when."""

import threading
from pathlib import Path

import pyarrow.parquet as pq

from analysis.schema import KINDS, SCHEMA_VERSION, column_names
from loadgen.trace import TraceWriter
from loadgen.trace.writer import CHUNK_ROWS, CHUNKS


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
    handed[0]()  # the thread pool runs it: the writer process has the batch (spilled, see below)
    assert w.pending() == 0 and w.rows_written["event"] == 2
    w.close()
    (part,) = (tmp_path / "traces" / "event").glob("*.parquet")
    assert pq.read_table(part).num_rows == 2


def _publish(i: int) -> tuple:
    head = (f"run:p/w/0:{i}", "p/w/0", "p", i, "base", 1_000 + i, 1_050 + i, 100, "rk", False, None, "sent")
    return head + (None,) * (len(column_names("publish")) - 3 - len(head))  # the nullable columns after outcome


def test_a_writer_process_writes_the_same_rows_as_the_writer_itself(tmp_path: Path):
    inline = TraceWriter(tmp_path / "a", "r", "w", out_of_process=False)
    child = TraceWriter(tmp_path / "b", "r", "w", out_of_process=True)
    for w in (inline, child):
        for i in range(3):
            w.append("publish", _publish(i))
        w.append("event", _event(0))
        w.flush()
    assert child.rows_written == inline.rows_written == {**dict.fromkeys(KINDS, 0), "publish": 3, "event": 1}
    inline.close()
    child.close()
    for kind in ("publish", "event"):
        (a,) = (tmp_path / "a" / "traces" / kind).glob("*.parquet")
        (b,) = (tmp_path / "b" / "traces" / kind).glob("*.parquet")
        assert pq.read_table(b).equals(pq.read_table(a)) and b.name == a.name


def test_a_writer_given_an_offload_writes_in_a_process_that_ends_at_close(tmp_path: Path):
    handed: list = []
    w = TraceWriter(tmp_path, "r", "w", max_rows=2, offload=handed.append)
    w.append("event", _event(0))
    w.append("event", _event(1))
    handed[0]()
    proc = w._child.proc
    w.append("event", _event(2))
    w.close()
    assert proc.poll() == 0
    assert sum(pq.read_table(p).num_rows for p in (tmp_path / "traces" / "event").glob("*.parquet")) == 3
    assert not [p for p in (tmp_path / "traces" / "event").iterdir() if p.name.startswith(".")]


class _Name(str):
    """A str subclass: marshal refuses it, pickle does not."""


def test_rows_marshal_can_not_carry_still_reach_the_file(tmp_path: Path):
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    w.append("event", (1, "phase_start", "runner", _Name("p"), None, None))
    w.close()
    (part,) = (tmp_path / "traces" / "event").glob("*.parquet")
    assert pq.read_table(part).column("name").to_pylist() == ["p"]


def test_when_the_writer_process_dies_the_rows_are_written_here_instead(tmp_path: Path):
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    w._child.proc.kill()
    w._child.proc.wait()
    w.append("event", _event(0))
    w.flush()
    w.append("event", _event(1))
    w.close()
    assert w.rows_written["event"] == 2
    assert sum(pq.read_table(p).num_rows for p in (tmp_path / "traces" / "event").glob("*.parquet")) == 2


def test_a_batch_the_writer_process_can_not_convert_is_set_aside_and_named_and_the_others_are_written(
    tmp_path: Path, capfd
):
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    w.append("event", ("not a time", "phase_start", "runner", "p", None, None))
    w.flush()
    w.append("event", _event(1))
    w.close()
    event_dir = tmp_path / "traces" / "event"
    (part,) = event_dir.glob("*.parquet")
    assert pq.read_table(part).column("name").to_pylist() == ["p1"]
    (aside,) = [p.name for p in event_dir.iterdir() if p.name.endswith(".failed")]
    assert aside == ".part-w-000001.parquet.raw.failed"
    assert f"can not convert {event_dir / '.part-w-000001.parquet.raw'}" in capfd.readouterr().err


def test_the_writer_process_keeps_batches_as_they_came_until_its_input_ends(tmp_path: Path):
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    for i in range(3):
        w.append("publish", _publish(i))
    w.flush()
    publish_dir = tmp_path / "traces" / "publish"
    assert [p.name for p in publish_dir.iterdir()] == [".part-w-000001.parquet.raw"]  # hidden from readers
    w.close()
    (part,) = publish_dir.iterdir()
    assert part.name == "part-w-000001.parquet" and pq.read_table(part).column("seq").to_pylist() == [0, 1, 2]


def test_beyond_its_limit_the_writer_process_converts_its_oldest_batches_during_the_run(tmp_path: Path):
    """Its own loop, on pipes, with a limit of one byte: every batch is converted as it comes."""
    import os
    import threading

    from loadgen.trace.sink import serve
    from loadgen.trace.writer import _Child, serialise

    (tmp_path / "event").mkdir()
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    server = threading.Thread(target=serve, args=(tmp_path, "r", "w", to_child_r, from_child_w, 1))
    server.start()
    child = _Child.__new__(_Child)  # its write() on these pipes, without a process
    child._to_child, child._from_child, child.sent_bytes = to_child_w, from_child_r, 0
    child.write("event", 1, [serialise([_event(0)])])
    child.write("event", 2, [serialise([_event(1)])])  # read only after 1 was converted
    names = {p.name for p in (tmp_path / "event").iterdir()}
    assert "part-w-000001.parquet" in names and ".part-w-000001.parquet.raw" not in names
    os.close(to_child_w)
    server.join(10)
    assert sorted(p.name for p in (tmp_path / "event").iterdir()) == ["part-w-000001.parquet", "part-w-000002.parquet"]
    for fd in (to_child_r, from_child_r, from_child_w):
        os.close(fd)


def test_what_a_killed_writer_process_spilled_is_converted_by_its_writer_at_close(tmp_path: Path):
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    for i in range(5):
        w.append("publish", _publish(i))
    w.flush()
    w._child.proc.kill()  # before its input ended: the batch is still spilled
    w._child.proc.wait()
    w.close()
    seqs = [r["seq"] for p in (tmp_path / "traces" / "publish").iterdir() for r in pq.read_table(p).to_pylist()]
    assert seqs == [0, 1, 2, 3, 4]


def test_recover_converts_every_workers_spilled_batches_once(tmp_path: Path):
    from loadgen.trace.writer import CHUNKS, encode, recover, serialise, spill

    root = tmp_path / "traces"
    (root / "event").mkdir(parents=True)
    for worker, seq in (("a", 1), ("a", 2), ("a-7", 1)):  # a worker's name may begin with another's
        spill(
            root, "event", seq, "run-9", worker, CHUNKS, b"".join(encode([serialise([_event(seq), _event(10 + seq)])]))
        )
    assert recover(root, "a") == 4
    assert recover(root) == 2 and recover(root) == 0
    rows = {
        (p.name, r["worker"], r["run_id"], r["name"])
        for p in (root / "event").iterdir()
        for r in pq.read_table(p).to_pylist()
    }
    assert rows == {
        ("part-a-000001.parquet", "a", "run-9", "p1"),
        ("part-a-000001.parquet", "a", "run-9", "p11"),
        ("part-a-000002.parquet", "a", "run-9", "p2"),
        ("part-a-000002.parquet", "a", "run-9", "p12"),
        ("part-a-7-000001.parquet", "a-7", "run-9", "p1"),
        ("part-a-7-000001.parquet", "a-7", "run-9", "p11"),
    }


def test_rows_are_serialised_as_they_come_and_the_child_reads_every_row_back_in_order(tmp_path: Path):
    from decimal import Decimal

    from loadgen.trace.writer import decode, encode

    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    rows = [(i, f"r{i}") for i in range(2 * CHUNK_ROWS + 7)]
    rows[CHUNK_ROWS + 3] = (Decimal("1.5"), "marshal can not: this chunk is pickled")
    for row in rows:
        w.append("event", row)
    # every full chunk is bytes already; only the 7 rows after them are still tuples
    assert [fmt for fmt, _ in w._chunks["event"]] == [0, 1]  # marshal, pickle
    assert w._rows["event"] == rows[-7:] and w.pending() == len(rows)
    assert decode(CHUNKS, b"".join(encode(w._chunks["event"]))) == rows[:-7]
    w._chunks["event"], w._rows["event"], w._chunked["event"] = [], [], 0  # not for the file: not events
    w.close()


def test_a_full_batch_of_chunks_is_flushed_and_the_file_holds_every_row_in_order(tmp_path: Path):
    handed: list = []
    w = TraceWriter(tmp_path, "r", "w", max_rows=CHUNK_ROWS * 2, offload=handed.append)
    for i in range(CHUNK_ROWS * 2 + 5):
        w.append("publish", _publish(i))
    assert len(handed) == 1 and w.pending() == 5  # two chunks made a batch; 5 rows wait for the next
    handed[0]()
    w.close()
    seqs = [
        r["seq"]
        for p in sorted((tmp_path / "traces" / "publish").glob("*.parquet"))
        for r in pq.read_table(p).to_pylist()
    ]
    assert seqs == list(range(CHUNK_ROWS * 2 + 5))


def test_when_the_writer_process_dies_its_serialised_rows_are_written_here(tmp_path: Path):
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    for i in range(CHUNK_ROWS + 3):
        w.append("publish", _publish(i))
    w._child.proc.kill()
    w._child.proc.wait()
    w.close()
    assert w.rows_written["publish"] == CHUNK_ROWS + 3
    seqs = [r["seq"] for p in (tmp_path / "traces" / "publish").glob("*.parquet") for r in pq.read_table(p).to_pylist()]
    assert sorted(seqs) == list(range(CHUNK_ROWS + 3))


def test_under_gevent_the_writer_process_sees_the_end_of_its_input_and_exits_by_itself(tmp_path: Path):
    """gevent's patched os.close defers a pipe's close to the loop's next turn, which an idle loop
    never takes while close() waits for the child: the child never saw EOF and was killed at the
    timeout. Its exit status tells the two apart (0: it ended on EOF; -9: killed)."""
    import subprocess
    import sys

    script = (
        "from gevent import monkey; monkey.patch_all()\n"
        "import sys\n"
        "from loadgen.trace import TraceWriter\n"
        "w = TraceWriter(sys.argv[1], 'r', 'w', out_of_process=True)\n"
        "w.append('event', (1, 'phase_start', 'runner', 'p', None, None))\n"
        "child = w._child\n"
        "child.close(timeout_s=20)\n"
        "print(child.proc.returncode)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"]


def test_every_column_of_a_row_reads_back_as_written_nulls_included_and_only_repeating_strings_use_a_dictionary(
    tmp_path: Path,
):
    names = column_names("delivery")[3:]
    full = (
        "m-1",
        "c/w/0",
        "c",
        "base",
        7,
        True,
        10,
        20,
        30,
        40,
        50,
        "acked",
        100,
        3,
        128,
        1.5,
        True,
        2,
        60,
        70,
        9,
        "high",
        4,
        5,
        True,
        25,
        "handler_error",
        "builtins.KeyError",
        1234,
    )
    empty = (
        "m-2",
        "c/w/0",
        "c",
        "base",
        8,
        False,
        None,
        21,
        None,
        None,
        None,
        "unsettled",
        0,
        0,
        0,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
    )
    assert len(full) == len(empty) == len(names)
    w = TraceWriter(tmp_path, "r", "w", out_of_process=False)
    w.append("delivery", full)
    w.append("delivery", empty)
    w.close()
    (part,) = (tmp_path / "traces" / "delivery").glob("*.parquet")
    rows = pq.read_table(part).to_pylist()
    assert [tuple(r[n] for n in names) for r in rows] == [full, empty]
    meta = pq.ParquetFile(part).metadata.row_group(0)
    dictionary = {
        meta.column(i).path_in_schema
        for i in range(meta.num_columns)
        if any("DICTIONARY" in e for e in meta.column(i).encodings)
    }
    assert {"consumer", "outcome", "run_id"} <= dictionary
    assert not dictionary & {"message_id", "receive_ns", "delivery_tag", "processing_ms"}  # never repeat


def test_rows_appended_after_close_are_written_by_the_next_close_and_reported(tmp_path: Path, caplog):
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    w.append("event", _event(0))
    w.close()
    w.append("event", _event(1))  # e.g. a callback that still ran while the process was ending
    with caplog.at_level("WARNING"):
        w.close()  # what atexit does
    names = sorted(
        r["name"] for p in (tmp_path / "traces" / "event").glob("*.parquet") for r in pq.read_table(p).to_pylist()
    )
    assert names == ["p0", "p1"]
    assert "1 rows arrived after it was closed" in caplog.text


def test_rows_handed_to_a_thread_that_never_ran_the_write_are_written_at_close(tmp_path: Path):
    """The run's flush loop hands each kind's write to the thread pool and waits; killed at the run's
    end while it waited, the write never ran, and those rows were in no part file."""
    never_run: list = []
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    for i in range(3):
        w.append("publish", _publish(i))
    w.flush_kind("publish", run_in=never_run.append)  # handed off, not run
    assert w.pending() == 0
    w.append("publish", _publish(3))  # after the hand-off: written by close's own flush
    w.close()

    def seqs_by_part():
        parts = sorted((tmp_path / "traces" / "publish").glob("*.parquet"))
        return [[r["seq"] for r in pq.read_table(p).to_pylist()] for p in parts]

    assert seqs_by_part() == [[0, 1, 2], [3]]  # the handed rows first, in part order
    never_run[0]()  # the thread gets to it after all: the rows are not written twice
    assert seqs_by_part() == [[0, 1, 2], [3]]


def test_close_waits_for_a_write_a_thread_has_started_before_it_writes_the_rest(tmp_path: Path, monkeypatch):
    """A write a pool thread is running when the run ends: close waits for it, so its rows are in a
    part and the rows buffered after it come in the next part, none twice."""
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    started, release = threading.Event(), threading.Event()
    write_in_child = w._write_in_child

    def held(*args):
        if not started.is_set():  # the thread's write only: close's own goes straight through
            started.set()
            release.wait(10)
        write_in_child(*args)

    monkeypatch.setattr(w, "_write_in_child", held)
    for i in range(3):
        w.append("publish", _publish(i))
    w.flush_kind("publish", run_in=lambda job: threading.Thread(target=job).start())
    assert started.wait(5)  # the thread holds the write
    w.append("publish", _publish(3))
    threading.Timer(0.3, release.set).start()
    w.close()
    assert release.is_set()  # close returned only once the thread's write could go on
    parts = sorted((tmp_path / "traces" / "publish").glob("*.parquet"))
    assert [[r["seq"] for r in pq.read_table(p).to_pylist()] for p in parts] == [[0, 1, 2], [3]]
