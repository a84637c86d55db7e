"""The end of a run with workers (loadgen.run.worker_files): a worker that does not see the master's
run directory writes into one of its own and sends its files, which the master writes under the run
directory byte for byte; the master waits for every worker's traces, and a worker on another host
whose files have not all arrived, or that never sent any, is named with what is missing once no
news came for the timeout; a complete run ends the wait at once."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

from loadgen.run import shipping
from loadgen.run.worker_files import Master, Worker


def _master(tmp_path, remote):
    master = Master()
    master.new_run(str(tmp_path))
    master.finished = {"local-1", "remote-1"}
    master.converted = {"local-1", "remote-1"}
    for worker in remote:
        master.worker_ready(worker, own_dir=True)
    data = b"rows"
    master.receiver.chunk(
        "remote-1",
        {
            "path": "traces/publish/part-r-1.parquet",
            "offset": 0,
            "data": data,
            "sha256": hashlib.sha256(data).hexdigest(),
        },
    )
    return master, hashlib.sha256(data).hexdigest()


def test_a_complete_run_ends_the_wait_at_once(tmp_path):
    master, digest = _master(tmp_path, {"remote-1"})
    master.receiver.manifest("remote-1", {"traces/publish/part-r-1.parquet": digest})
    said: list[str] = []
    assert master.wait(said.extend, progress_every_s=1.0, timeout_s=30) == []
    assert said == []


def test_a_remote_worker_missing_a_file_and_one_never_heard_from_are_named(tmp_path):
    master, digest = _master(tmp_path, {"remote-1", "remote-dead"})
    master.receiver.manifest(
        "remote-1", {"traces/publish/part-r-1.parquet": digest, "traces/delivery/part-r-2.parquet": "ab"}
    )
    said: list[str] = []
    missing = master.wait(said.extend, progress_every_s=1.0, timeout_s=0.3)
    assert missing == [
        {"worker": "remote-1", "missing": ["traces/delivery/part-r-2.parquet"]},
        {"worker": "remote-dead", "missing": ["(its manifest)"]},
    ]
    assert any("2 worker(s) did not send all their traces" in line for line in said)


def test_a_local_worker_that_never_converted_is_not_named_missing(tmp_path):
    master, _digest = _master(tmp_path, set())
    master.finished = {"local-1", "local-2"}
    master.converted = {"local-1"}
    said: list[str] = []
    assert master.wait(said.extend, progress_every_s=1.0, timeout_s=0.3) == []
    assert any("`sojourn analyze` converts what they left" in line for line in said)


class _Link:
    """Locust's messaging between one worker and the master: a message sent is received at once."""

    def __init__(self):
        self.handlers = {}

    def register_message(self, kind, handler):
        self.handlers[kind] = handler

    def send_message(self, kind, data):
        self.handlers[kind](SimpleNamespace(data=data))


def test_a_worker_that_does_not_see_the_run_directory_sends_its_files_whole(tmp_path, monkeypatch):
    master_dir = tmp_path / "master-run"
    shipping.write_token(master_dir, "token-of-the-master")
    link = _Link()
    master = Master()
    master.register(link)
    master.new_run(str(master_dir))

    same_disk = Worker()
    assert same_disk.place(str(master_dir), "r1", "token-of-the-master") == str(master_dir)
    assert not same_disk.own_dir

    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # another host's working directory
    worker = Worker()
    run_dir = worker.place(str(master_dir), "r1", "a-token-this-host-does-not-see")
    assert worker.own_dir and Path(run_dir).parent == tmp_path / "elsewhere" / "runs"
    written = {
        "traces/delivery/part-w-0.parquet": bytes(range(256)) * 2049,  # two chunks and a bit
        "traces/publish/part-w-0.parquet": b"publishes",
        "memory/worker.jsonl": b"",
    }
    for rel, data in written.items():
        (Path(run_dir) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / rel).write_bytes(data)
    ctx = SimpleNamespace(run_dir=run_dir, worker="w-on-another-host")
    master.worker_ready(ctx.worker, worker.own_dir)
    worker.finished(link, ctx)
    worker.ship_once(link, ctx)
    worker.ship_once(link, ctx)  # the run's end and test_stop both ask: once

    for rel, data in written.items():
        assert (master_dir / rel).read_bytes() == data
    assert master.receiver.received_bytes() == sum(map(len, written.values()))
    assert master.wait(lambda lines: None, progress_every_s=1.0, timeout_s=0.3) == []
