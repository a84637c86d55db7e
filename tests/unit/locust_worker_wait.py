"""The master's wait for its workers' traces at the end of a run (loadgen.run.locust_session): a
worker on another host whose files have not all arrived, or that never sent any, is named with
what is missing once no news came for the timeout; a complete run ends the wait at once."""

import hashlib

from loadgen.run import shipping
from loadgen.run.locust_session import _State, _wait_for_workers


def _setup(tmp_path, remote):
    _State.finished_workers = {"local-1", "remote-1"}
    _State.converted_workers = {"local-1", "remote-1"}
    _State.remote_workers = set(remote)
    _State.receiver = receiver = shipping.Receiver(tmp_path)
    data = b"rows"
    receiver.chunk(
        "remote-1",
        {
            "path": "traces/publish/part-r-1.parquet",
            "offset": 0,
            "data": data,
            "sha256": hashlib.sha256(data).hexdigest(),
        },
    )
    return receiver, hashlib.sha256(data).hexdigest()


def test_a_complete_run_ends_the_wait_at_once(tmp_path):
    receiver, digest = _setup(tmp_path, {"remote-1"})
    receiver.manifest("remote-1", {"traces/publish/part-r-1.parquet": digest})
    assert _wait_for_workers(timeout_s=30) == []


def test_a_remote_worker_missing_a_file_and_one_never_heard_from_are_named(tmp_path, capsys):
    receiver, digest = _setup(tmp_path, {"remote-1", "remote-dead"})
    receiver.manifest("remote-1", {"traces/publish/part-r-1.parquet": digest, "traces/delivery/part-r-2.parquet": "ab"})
    missing = _wait_for_workers(timeout_s=0.3)
    assert missing == [
        {"worker": "remote-1", "missing": ["traces/delivery/part-r-2.parquet"]},
        {"worker": "remote-dead", "missing": ["(its manifest)"]},
    ]
    assert "2 worker(s) did not send all their traces" in capsys.readouterr().err


def test_a_local_worker_that_never_converted_is_not_named_missing(tmp_path, capsys):
    _setup(tmp_path, set())
    _State.finished_workers = {"local-1", "local-2"}
    _State.converted_workers = {"local-1"}
    assert _wait_for_workers(timeout_s=0.3) == []
    assert "`sojourn analyze` converts what they left" in capsys.readouterr().err
