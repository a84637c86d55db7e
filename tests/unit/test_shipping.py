"""A worker's files sent to the master in chunks (loadgen.run.shipping): whole files arrive under the
master's run directory at the same paths, byte for byte; a damaged or missing file keeps its worker
incomplete; nothing lands outside traces/ and memory/."""

from __future__ import annotations

import hashlib
import os

import pytest

from loadgen.run import shipping


def _worker_dir(tmp_path):
    root = tmp_path / "worker"
    files = {
        "traces/publish/part-w1-1.parquet": os.urandom(600_000),  # three chunks of 256 KiB
        "traces/event/part-w1-2.parquet": b"",  # an empty file is one message
        "memory/worker-w1.json": b'{"samples": []}',
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "traces" / "publish" / ".part-w1-3.parquet.raw").write_bytes(b"spilled, not finished")
    (root / "run.json").write_text("{}")  # the master's, not the worker's to send
    return root, files


def _send(root, receiver, worker="w1", damage=None):
    manifest = {}
    for rel in shipping.files_to_ship(root):
        for chunk in shipping.chunks(root, rel):
            if damage == rel and chunk["offset"] == 0:
                chunk = {**chunk, "data": b"X" + chunk["data"][1:]}
            receiver.chunk(worker, chunk)
            if "sha256" in chunk:
                manifest[rel] = chunk["sha256"]
    receiver.manifest(worker, manifest)
    return manifest


def test_every_finished_file_arrives_whole_at_its_path(tmp_path):
    root, files = _worker_dir(tmp_path)
    assert sorted(shipping.files_to_ship(root)) == sorted(files)  # not the spilled batch, not run.json
    receiver = shipping.Receiver(tmp_path / "master")
    manifest = _send(root, receiver)
    for rel, data in files.items():
        assert (tmp_path / "master" / rel).read_bytes() == data
        assert manifest[rel] == hashlib.sha256(data).hexdigest()
    assert receiver.complete("w1") and receiver.missing("w1") == []
    assert receiver.received_bytes() == sum(map(len, files.values()))
    assert not list((tmp_path / "master").rglob(".*"))  # no temporary file left


def test_a_damaged_file_is_not_kept_and_its_worker_stays_incomplete(tmp_path):
    root, _files = _worker_dir(tmp_path)
    receiver = shipping.Receiver(tmp_path / "master")
    with pytest.raises(shipping.ShippingError, match="arrived damaged"):
        _send(root, receiver, damage="traces/publish/part-w1-1.parquet")
    assert not (tmp_path / "master" / "traces" / "publish" / "part-w1-1.parquet").exists()
    assert not receiver.complete("w1")


def test_a_worker_is_complete_only_with_its_manifest_and_every_file_in_it(tmp_path):
    root, _files = _worker_dir(tmp_path)
    receiver = shipping.Receiver(tmp_path / "master")
    rel = "memory/worker-w1.json"
    for chunk in shipping.chunks(root, rel):
        receiver.chunk("w1", chunk)
    assert not receiver.complete("w1") and receiver.missing("w1") == ["(its manifest)"]
    receiver.manifest("w1", {rel: hashlib.sha256(b'{"samples": []}').hexdigest(), "traces/x/part-1.parquet": "00"})
    assert not receiver.complete("w1") and receiver.missing("w1") == ["traces/x/part-1.parquet"]
    assert receiver.missing("w2") == ["(its manifest)"]  # never heard of


@pytest.mark.parametrize("rel", ["../escape.parquet", "traces/../../x", "run.json", "traces/.hidden", "/etc/passwd"])
def test_a_path_outside_traces_and_memory_is_refused(tmp_path, rel):
    receiver = shipping.Receiver(tmp_path / "master")
    with pytest.raises(shipping.ShippingError, match="outside traces/ and memory/"):
        receiver.chunk("w1", {"path": rel, "offset": 0, "data": b"x", "sha256": "0"})
    assert not (tmp_path / "escape.parquet").exists()


def test_a_worker_sees_the_masters_directory_by_its_token(tmp_path):
    token = shipping.new_token()
    shipping.write_token(tmp_path / "run", token)
    assert shipping.shares_run_dir(tmp_path / "run", token)
    assert not shipping.shares_run_dir(tmp_path / "run", shipping.new_token())
    assert not shipping.shares_run_dir(tmp_path / "elsewhere", token)
