"""CPU used by the broker, by a process tree and by the whole machine during a window, from /proc.

A background thread samples every `interval_s`: the broker's processes (`beam.smp`, found by
name), the descendants of some root processes (a `sojourn run` or the bare pair: Locust's
master, its workers, the trace writers' children), and the machine's busy time (/proc/stat).
A process that exits keeps the last CPU time it was seen with, so a group's total never
goes down. `cores(start_ns, end_ns)` turns the samples nearest a wall-clock window into
cores used (CPU seconds per second), also for the tree's busiest process (a gevent process
near 1.0 is bound by its one core). Linux only; elsewhere every figure is None.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(comm, ppid, utime + stime ticks) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()  # fields[0] is the state (field 3)
    return comm, int(fields[1]), int(fields[11]) + int(fields[12])


def _processes() -> dict[int, tuple[str, int, int]]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                out[int(entry)] = st
    return out


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over all cores since boot."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already inside user/nice
    return total - idle, total


class CpuSampler:
    """Sample the broker, the trees under `root_pids` and the machine until stop()."""

    def __init__(self, root_pids: list[int], interval_s: float = 0.25):
        self.interval_s = interval_s
        self.samples: list[tuple[int, int, int, int, int]] = []  # time_ns, broker, tree, busy, total ticks
        self.per_process: list[dict[int, int]] = []  # the tree's ticks per pid, at each sample
        self._last: dict[str, dict[int, int]] = {"broker": {}, "tree": {}}
        self._tree: set[int] = set(root_pids)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self.available = os.path.exists("/proc/stat")

    def start(self) -> CpuSampler:
        if self.available:
            self.sample()
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if self.available:
            self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        procs = _processes()
        grew = True
        while grew:  # children of processes already in the tree, to any depth
            before = len(self._tree)
            self._tree |= {pid for pid, (_c, ppid, _t) in procs.items() if ppid in self._tree}
            grew = len(self._tree) > before
        for pid, (comm, _ppid, ticks) in procs.items():
            if comm == "beam.smp":
                self._last["broker"][pid] = ticks
            if pid in self._tree:
                self._last["tree"][pid] = ticks
        busy, total = _machine_ticks()
        self.per_process.append(dict(self._last["tree"]))
        self.samples.append(
            (time.time_ns(), sum(self._last["broker"].values()), sum(self._last["tree"].values()), busy, total)
        )

    def cores(self, start_ns: int, end_ns: int) -> dict:
        """Cores used by the broker, the tree, its busiest process and the machine between the samples
        nearest the window."""
        none = {"broker_cores": None, "loadgen_cores": None, "busiest_process_cores": None, "machine_busy_cores": None}
        if len(self.samples) < 2:
            return none
        ia = min(range(len(self.samples)), key=lambda i: abs(self.samples[i][0] - start_ns))
        ib = min(range(len(self.samples)), key=lambda i: abs(self.samples[i][0] - end_ns))
        a, b = self.samples[ia], self.samples[ib]
        seconds = (b[0] - a[0]) / 1e9
        if seconds <= 0:
            return none
        pa, pb = self.per_process[ia], self.per_process[ib]
        busiest = max((ticks - pa.get(pid, 0) for pid, ticks in pb.items()), default=0)
        ncpu = os.cpu_count() or 1
        return {
            "broker_cores": round((b[1] - a[1]) * TICK_S / seconds, 2),
            "loadgen_cores": round((b[2] - a[2]) * TICK_S / seconds, 2),
            "busiest_process_cores": round(busiest * TICK_S / seconds, 2),
            "machine_busy_cores": round(ncpu * (b[3] - a[3]) / max(1, b[4] - a[4]), 2),
        }
