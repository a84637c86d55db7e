"""`sojourn run` waits for every process of the run, not only Locust's master: a worker forked by
`--processes` may still be writing its last traces when the master has exited."""

import os
import subprocess
import sys

from loadgen.commands.common import _wait_for_run_processes


def _holder(alive_w: int, seconds: float, done=None) -> subprocess.Popen:
    """A process that holds the pipe's write end for `seconds`, as a worker process does, then
    creates the file `done` (its last act: the pipe closes only as it exits, after that)."""
    code = f"import time; time.sleep({seconds})" + (f"; open({str(done)!r}, 'w').close()" if done else "")
    return subprocess.Popen([sys.executable, "-c", code], pass_fds=(alive_w,))


def test_it_returns_only_once_the_last_holder_has_exited_and_says_it_is_waiting(tmp_path, capsys):
    alive_r, alive_w = os.pipe()
    quick, slow = _holder(alive_w, 0.1, tmp_path / "quick"), _holder(alive_w, 2.0, tmp_path / "slow")
    os.close(alive_w)  # as run_locust does once the master has it
    _wait_for_run_processes(alive_r, timeout_s=60)
    assert (tmp_path / "quick").exists() and (tmp_path / "slow").exists()  # both had finished their work
    quick.wait()
    slow.wait()
    assert "waiting for the worker processes" in capsys.readouterr().err


def test_a_holder_that_never_exits_is_reported_and_not_waited_for_forever(capsys):
    alive_r, alive_w = os.pipe()
    stuck = _holder(alive_w, 60)
    os.close(alive_w)
    try:
        _wait_for_run_processes(alive_r, timeout_s=1.5)
        assert stuck.poll() is None
        assert "still running after 2 s; their last traces may be missing" in capsys.readouterr().err
    finally:
        stuck.kill()
        stuck.wait()


def test_without_other_holders_it_returns_at_once_and_says_nothing(capsys):
    alive_r, alive_w = os.pipe()
    os.close(alive_w)
    _wait_for_run_processes(alive_r, timeout_s=60)
    assert capsys.readouterr().err == ""


def test_a_trace_writer_process_holds_the_pipe_too_so_the_wait_covers_its_conversion(tmp_path, monkeypatch):
    import threading

    import pyarrow.parquet as pq

    from loadgen.trace import TraceWriter
    from loadgen.trace.writer import ALIVE_FD_ENV

    alive_r, alive_w = os.pipe()
    monkeypatch.setenv(ALIVE_FD_ENV, str(alive_w))  # as run_locust hands it to Locust
    w = TraceWriter(tmp_path, "r", "w", out_of_process=True)
    os.close(alive_w)  # only the writer's process holds it now
    w.append("event", (1, "phase_start", "runner", "p", None, None))
    w.flush()  # spilled: converted only once the writer closes its input
    threading.Timer(0.5, w.close).start()
    _wait_for_run_processes(alive_r, timeout_s=60)
    (part,) = (tmp_path / "traces" / "event").glob("*.parquet")
    assert pq.read_table(part).num_rows == 1


def test_batches_a_stopped_writer_left_are_converted_and_the_command_says_so(tmp_path, capsys):
    from loadgen.commands.common import recover_traces
    from loadgen.trace.writer import CHUNKS, encode, serialise, spill

    (tmp_path / "traces" / "event").mkdir(parents=True)
    rows = [(i, "phase_start", "runner", f"p{i}", None, None) for i in range(1200)]
    spill(tmp_path / "traces", "event", 4, "r", "w", CHUNKS, b"".join(encode([serialise(rows)])))
    recover_traces(str(tmp_path))
    assert [p.name for p in (tmp_path / "traces" / "event").iterdir()] == ["part-w-000004.parquet"]
    assert "converted 1,200 trace rows a stopped trace writer had left unconverted" in capsys.readouterr().err
    recover_traces(str(tmp_path))  # nothing left: nothing said
    assert capsys.readouterr().err == ""
