"""loadgen.run.memory: per-process memory samples from /proc (a fake /proc tree here), the growth
rate over a run's second half, thinning for long runs, and the merge into run.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.run import memory
from loadgen.run.runinfo import read_run_json


def fake_proc(root: Path, pid: int, rss_kb: int, cmdline: list[str], children: list[int] = ()) -> None:
    (root / str(pid) / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "status").write_text(f"Name:\tpython\nVmPeak:\t999999 kB\nVmRSS:\t{rss_kb} kB\nThreads:\t3\n")
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline) + b"\0")
    (root / str(pid) / "task" / str(pid) / "children").write_text(" ".join(map(str, children)))


def test_a_process_and_its_children_are_sampled_and_named(tmp_path):
    fake_proc(tmp_path, 100, 51200, ["locust", "-f", "x"], children=[101, 102])
    fake_proc(tmp_path, 101, 20480, ["/usr/bin/python3", "-m", "loadgen.trace.sink", "d"])
    fake_proc(tmp_path, 102, 10240, ["/usr/bin/python3", "-m", "loadgen.netem.proxy", "--port", "1"])
    clock = iter([0.0, 5.0])
    sampler = memory.MemorySampler("locust", lambda: next(clock), pid=100, proc=str(tmp_path))
    sampler.sample()
    (tmp_path / "101" / "status").write_text("VmRSS:\t30720 kB\n")
    sampler.sample()
    seen = {p.process: p.samples for p in sampler.processes.values()}
    assert seen == {
        "locust": [(0.0, 50.0), (5.0, 50.0)],
        "locust trace writer": [(0.0, 20.0), (5.0, 30.0)],
        "locust network proxy": [(0.0, 10.0), (5.0, 10.0)],
    }


def test_children_that_are_not_the_runs_own_are_left_out(tmp_path):
    """A master's forked worker processes are its children too: they sample themselves."""
    fake_proc(tmp_path, 100, 1024, ["locust", "--processes", "2"], children=[101])
    fake_proc(tmp_path, 101, 1024, ["locust", "--processes", "2"])
    sampler = memory.MemorySampler("master", lambda: 1.0, pid=100, proc=str(tmp_path))
    sampler.sample()
    assert [p.process for p in sampler.processes.values()] == ["master"]


def test_a_child_that_exited_is_skipped_not_an_error(tmp_path):
    fake_proc(tmp_path, 100, 1024, ["locust"], children=[101])
    sampler = memory.MemorySampler("locust", lambda: 1.0, pid=100, proc=str(tmp_path))
    sampler.sample()
    assert [p.process for p in sampler.processes.values()] == ["locust"]


def test_without_proc_nothing_is_sampled_and_the_file_says_so(tmp_path):
    sampler = memory.MemorySampler("locust", lambda: 0.0, pid=4242, proc=str(tmp_path / "none"))
    sampler.sample()
    data = json.loads(Path(sampler.write(str(tmp_path / "run"))).read_text())
    assert data["available"] is False and data["processes"] == []


def test_growth_is_the_slope_of_the_second_half_in_mb_per_minute():
    # first half: start-up from 10 to 100 MB; second half: +1 MB every 30 s = 2 MB/min
    samples = [(0.0, 10.0), (30.0, 60.0), (60.0, 100.0), (90.0, 100.0), (120.0, 101.0), (150.0, 102.0)]
    assert memory.growth(samples) == pytest.approx(2.0)
    flat = [(t * 5.0, 80.0) for t in range(10)]
    assert memory.growth(flat) == 0.0
    assert memory.growth(samples[:3]) is None


def test_a_long_run_keeps_at_most_max_samples_and_its_last_one(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "MAX_SAMPLES", 10)
    fake_proc(tmp_path, 100, 1024, ["locust"])
    t = [0.0]

    def clock() -> float:
        t[0] += 1.0
        return t[0]

    sampler = memory.MemorySampler("locust", clock, every_s=5.0, pid=100, proc=str(tmp_path))
    for _ in range(35):
        sampler.sample()
    (samples,) = [p.samples for p in sampler.processes.values()]
    assert len(samples) <= 10
    assert samples[0][0] == 1.0 and samples[-1][0] == 35.0  # the first and the newest are kept
    assert sampler.every_s > 5.0  # the interval grew as the samples were thinned


def test_every_processs_file_is_merged_into_run_json_largest_growth_first(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"run_id": "r", "status": "completed"}))
    for name, pid, slope in (("master", 1, 0.0), ("worker-a", 2, 3.0)):
        fake_proc(tmp_path / "proc", pid, 1024, [name])
        t = iter([0.0, 60.0, 120.0, 180.0])
        values = iter([10.0, 10.0, 10.0, 10.0 + 2 * slope])
        sampler = memory.MemorySampler(name, lambda t=t: next(t), pid=pid, proc=str(tmp_path / "proc"))
        for _ in range(4):
            status = tmp_path / "proc" / str(pid) / "status"
            status.write_text(f"VmRSS:\t{int(next(values) * 1024)} kB\n")
            sampler.sample()
        sampler.write(str(run_dir))
    memory.merge_into_run_json(str(run_dir))
    merged = read_run_json(str(run_dir))["memory"]
    assert merged["sampled"] is True
    assert [p["process"] for p in merged["processes"]] == ["worker-a", "master"]
    worker = merged["processes"][0]
    # second half: (120 s, 10 MB), (180 s, 16 MB): 6 MB a minute
    assert (worker["first_mb"], worker["last_mb"], worker["max_mb"], worker["growth_mb_per_min"]) == (
        10.0,
        16.0,
        16.0,
        6.0,
    )
    assert read_run_json(str(run_dir))["status"] == "completed"  # the rest of run.json is kept


def test_no_memory_files_leaves_run_json_alone(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r"}))
    assert memory.merge_into_run_json(str(tmp_path)) is None
    assert "memory" not in read_run_json(str(tmp_path))
