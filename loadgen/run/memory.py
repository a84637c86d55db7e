"""Memory of every process of a run, sampled while it runs, so that a long run shows whether any
of them grows (docs/run-json.md, `memory`).

Each process that runs the load (the local runner, the master, each worker) samples its own
resident set size and that of its child processes (the trace writer, the network proxy) every
EVERY_S seconds, from /proc. At its end it writes what it saw to RUN_DIR/memory/<process>.json;
the command that started the load merges those files into run.json's `memory` (`merge_into_run_json`).
Where /proc is missing (not Linux) nothing is sampled and `memory` says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EVERY_S",
    "MAX_SAMPLES",
    "ProcessMemory",
    "MemorySampler",
    "rss_mb",
    "child_pids",
    "process_label",
    "growth",
    "merged",
    "merge_into_run_json",
]

EVERY_S = 5.0
MAX_SAMPLES = 720
"""Per process: past this many samples every other one is dropped (and the interval doubles), so a
run of any length keeps at most this many: an hour at 5 s is exactly 720."""
_DIR = "memory"
_LABELS = {"loadgen.trace.sink": "trace writer", "loadgen.netem": "network proxy"}


def rss_mb(pid: int, proc: str = "/proc") -> float | None:
    """The resident set size of `pid` in MB (VmRSS), or None if it is gone or unreadable."""
    try:
        with open(f"{proc}/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def child_pids(pid: int, proc: str = "/proc") -> list[int]:
    """The direct children of `pid` (every thread's children file), in pid order."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return []
    for task in tasks:
        try:
            with open(f"{proc}/{pid}/task/{task}/children", encoding="ascii") as f:
                found.update(int(p) for p in f.read().split())
        except (OSError, ValueError):
            continue
    return sorted(found)


def process_label(pid: int, proc: str = "/proc") -> str:
    """What a child process is, from its command line: `trace writer`, `network proxy`, or its program
    (which the sampler leaves out: a master's forked workers sample themselves)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return "process"
    for arg in argv:
        for module, label in _LABELS.items():
            if arg.startswith(module):
                return label
    return os.path.basename(argv[0]) if argv else "process"


@dataclass
class ProcessMemory:
    """One process's samples: (seconds since t0, MB)."""

    process: str
    pid: int
    samples: list[tuple[float, float]] = field(default_factory=list)

    def add(self, t_s: float, mb: float) -> None:
        self.samples.append((round(t_s, 1), round(mb, 1)))

    def thin(self) -> None:
        """Every other sample dropped (the first and the last kept)."""
        kept = self.samples[::2]
        if kept and kept[-1] != self.samples[-1]:
            kept.append(self.samples[-1])
        self.samples = kept

    def as_dict(self) -> dict[str, Any]:
        values = [mb for _t, mb in self.samples]
        return {
            "process": self.process,
            "pid": self.pid,
            "first_mb": values[0] if values else None,
            "last_mb": values[-1] if values else None,
            "max_mb": max(values) if values else None,
            "growth_mb_per_min": growth(self.samples),
            "samples": [list(s) for s in self.samples],
        }


def growth(samples: Iterable[tuple[float, float]]) -> float | None:
    """The least-squares slope of MB against time over the second half of the samples, in MB per
    minute (the first half holds start-up: imports, connections, buffers filling). None with fewer
    than four samples."""
    points = list(samples)
    if len(points) < 4:
        return None
    half = points[len(points) // 2 :]
    n = len(half)
    mean_t = sum(t for t, _ in half) / n
    mean_m = sum(m for _, m in half) / n
    var = sum((t - mean_t) ** 2 for t, _ in half)
    if var == 0:
        return None
    slope = sum((t - mean_t) * (m - mean_m) for t, m in half) / var
    return round(slope * 60.0, 3)


class MemorySampler:
    """Samples this process (`name`) and its children every `every_s` while `running` says so.

    `clock` gives seconds since the run's t0. `sample()` takes one round; `run()` loops (a
    greenlet: `sleep` is gevent's). `write(run_dir)` saves what was seen for `merge_into_run_json`.
    """

    def __init__(
        self,
        name: str,
        clock: Callable[[], float],
        every_s: float = EVERY_S,
        pid: int | None = None,
        proc: str = "/proc",
    ) -> None:
        self.name = name
        self.clock = clock
        self.every_s = every_s
        self.pid = os.getpid() if pid is None else pid
        self.proc = proc
        self.processes: dict[int, ProcessMemory] = {}
        self.available = os.path.isdir(f"{proc}/{self.pid}")

    def sample(self) -> None:
        if not self.available:
            return
        t = self.clock()
        for pid in (self.pid, *child_pids(self.pid, self.proc)):
            mb = rss_mb(pid, self.proc)
            if mb is None:
                continue
            if pid not in self.processes:
                label = self.name if pid == self.pid else process_label(pid, self.proc)
                if label not in (self.name, *_LABELS.values()):
                    continue  # e.g. the worker processes a master forked: they sample themselves
                self.processes[pid] = ProcessMemory(label if pid == self.pid else f"{self.name} {label}", pid)
            self.processes[pid].add(t, mb)
        if any(len(p.samples) > MAX_SAMPLES for p in self.processes.values()):
            for p in self.processes.values():
                p.thin()
            self.every_s *= 2

    def run(self, stopped: Callable[[float], bool]) -> None:
        """Sample until `stopped(timeout)` (an Event's wait) says the run is over (the process takes
        the last sample as it writes the file)."""
        self.sample()
        while not stopped(self.every_s):
            self.sample()

    def write(self, run_dir: str) -> str:
        directory = os.path.join(run_dir, _DIR)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{self.name}-{self.pid}.json")
        data = {
            "available": self.available,
            "every_s": self.every_s,
            "processes": [p.as_dict() for p in self.processes.values()],
        }
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
        return path


def merged(run_dir: str) -> dict[str, Any]:
    """run.json's `memory` from every RUN_DIR/memory/*.json: every process, largest growth first."""
    directory = os.path.join(run_dir, _DIR)
    processes: list[Mapping[str, Any]] = []
    available, every = False, EVERY_S
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        available = available or bool(data.get("available"))
        every = max(every, float(data.get("every_s") or EVERY_S))
        processes += data.get("processes") or []
    processes.sort(key=lambda p: (-(p.get("growth_mb_per_min") or 0.0), str(p.get("process"))))
    return {"sampled": available, "every_s": every, "processes": processes}


def merge_into_run_json(run_dir: str) -> dict[str, Any] | None:
    """Write `memory` into RUN_DIR/run.json from the processes' files; None when there were none."""
    from loadgen.run.runinfo import update_run_json

    if not os.path.isdir(os.path.join(run_dir, _DIR)) or not os.path.isfile(os.path.join(run_dir, "run.json")):
        return None
    memory = merged(run_dir)
    update_run_json(run_dir, memory=memory)
    return memory
