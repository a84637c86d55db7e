"""End-to-end comparisons for `python -m benchmarks`: a whole `sojourn run` against the bare pika pair.

`end-to-end`: A is the bare pair (benchmarks.pair: a pika publisher with confirms, window 100,
and a pika consumer with manual acks, prefetch 100, two processes on one queue); B is the real
CLI, `sojourn run --no-analyze`, of a one-producer/one-consumer scenario written here with the
same message size, confirms window, prefetch and ack mode and a producer rate (1,000,000 msg/s)
far above what the machine can do, so the producer runs flat out and falls behind. Both are
measured the same way: acks per second at the consumer over the steady window [start +
warm-up, end of publishing], by the wall-clock time of each ack (the delivery trace's
`settle_ns` for B, counted with pyarrow). Rounds alternate A and B.

`scaling`: the same kind of scenario with `users` producers and `users` consumers, run with
`--processes 1, 2, 4` in an order that rotates every round; acked msg/s per process count and
the CPU the broker (beam.smp), the load generator's process tree and the machine used over
the steady window (benchmarks.cpu).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cpu import CpuSampler
from benchmarks.scratch import scratch_dir

REPO = Path(__file__).resolve().parent.parent
BODY_BYTES = 100
CONFIRM_WINDOW = 100
PREFETCH = 100
MAX_RATE = 1_000_000  # msg/s asked of the producer: far above what this machine does
CPU_KEYS = ("broker_cores", "loadgen_cores", "busiest_process_cores", "machine_busy_cores")

SCENARIO = """\
name: bench-e2e
queue: {{name: {queue}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {seconds}, warmup_s: {warmup}, drain_timeout_s: 60}}
producers:
  - {{name: p, count: {users}, rate: {rate}, arrival: constant, size_bytes: {size}, confirms: true,
      confirm_window: {window}}}
consumers:
  - {{name: c, count: {users}, prefetch: {prefetch}, ack_mode: manual, processing_ms: 0}}
"""


def warmup_for(seconds: float) -> float:
    """The part of a run left out of the rate: a quarter of it, at most 2 s."""
    return round(min(2.0, seconds / 4), 3)


def steady_rate(settle_ns: list[int], start_ns: int, end_ns: int) -> float:
    """Acks per second whose time falls in [start_ns, end_ns]."""
    if end_ns <= start_ns:
        raise ValueError(f"empty window [{start_ns}, {end_ns}]")
    return sum(1 for t in settle_ns if start_ns <= t <= end_ns) / ((end_ns - start_ns) / 1e9)


def _queue_name(tag: str) -> str:
    return f"sojourn.bench.{tag}.{os.getpid()}.{time.monotonic_ns() % 1_000_000}"


# --- A: the bare pair -------------------------------------------------------------------------


def _declare(url: str, queue: str, delete: bool = False) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    if delete:
        ch.queue_delete(queue)
    else:
        ch.queue_declare(queue)
        ch.queue_purge(queue)
    conn.close()


def bare_pair(url: str, seconds: float) -> dict:
    """Run the pair once; acked msg/s at the consumer over the steady window."""
    queue = _queue_name("pair")
    warmup = warmup_for(seconds)
    work = Path(scratch_dir("sojourn-bench-pair-"))
    start_file = str(work / "start")
    _declare(url, queue)
    common = {"url": url, "queue": queue, "seconds": seconds, "warmup_s": warmup, "start_file": start_file}
    specs = [
        {**common, "side": "consumer", "prefetch": PREFETCH},
        {**common, "side": "publisher", "confirm_window": CONFIRM_WINDOW},
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.pair", json.dumps(s)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in specs
    ]
    sampler = None
    try:
        for p in procs:
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"bare pair side did not start: {line!r} {p.stderr.read()[-2000:]}")
        sampler = CpuSampler([p.pid for p in procs]).start()
        start_ns = time.time_ns() + 200_000_000
        Path(start_file + ".tmp").write_text(str(start_ns))
        os.rename(start_file + ".tmp", start_file)
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=seconds + 60)
            if p.returncode != 0:
                raise RuntimeError(f"bare pair side failed ({p.returncode}): {err[-2000:]}")
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        if sampler is not None:
            sampler.stop()
        _declare(url, queue, delete=True)
    cons, pub = outs
    lo, hi = start_ns + int(warmup * 1e9), start_ns + int(seconds * 1e9)
    return {
        "per_s": round(cons["acked_in_window"] / (seconds - warmup), 1),
        "acked": cons["acked"],
        "published": pub["published"],
        "confirmed": pub["confirmed"],
        "late_start_ms": pub["late_start_ms"],
        **sampler.cores(lo, hi),
    }


# --- B: sojourn run -----------------------------------------------------------------------------


def _read(run_dir: Path, kind: str, columns: list[str]) -> dict[str, list]:
    import pyarrow.parquet as pq

    path = run_dir / "traces" / kind
    if not path.exists() or not any(path.glob("*.parquet")):
        return {c: [] for c in columns}
    return pq.read_table(path, columns=columns).to_pydict()


def run_facts(run_dir: Path) -> dict:
    """Rate, producer lag and accounting of one finished run, from run.json and its traces."""
    info = json.loads((run_dir / "run.json").read_text())
    t0, seconds, warmup = info["t0_ns"], info["duration_s"], info["warmup_s"]
    lo, hi = t0 + int(warmup * 1e9), t0 + int(seconds * 1e9)
    pub = _read(run_dir, "publish", ["message_id", "intended_ns", "publish_ns", "outcome", "worker", "producer"])
    dlv = _read(run_dir, "delivery", ["message_id", "settle_ns", "outcome", "worker", "consumer"])
    left = _read(run_dir, "leftover", ["message_id"])
    outcomes: dict[str, int] = {}
    for o in pub["outcome"]:
        outcomes[o] = outcomes.get(o, 0) + 1
    published = outcomes.get("confirmed", 0) + outcomes.get("sent", 0)
    acked_ids = {m for m, o in zip(dlv["message_id"], dlv["outcome"]) if o == "ack"}
    acks = [t for t, o in zip(dlv["settle_ns"], dlv["outcome"]) if o == "ack" and t is not None]
    published_ids = {m for m, o in zip(pub["message_id"], pub["outcome"]) if o in ("confirmed", "sent")}
    leftover_ids = set(left["message_id"]) - {None}
    last = max(range(len(pub["publish_ns"])), key=pub["publish_ns"].__getitem__) if pub["publish_ns"] else None
    planned = int(MAX_RATE * seconds * info["scenario"]["producers"][0]["count"])
    return {
        "per_s": round(steady_rate(acks, lo, hi), 1),
        "publish_per_s": round(steady_rate(pub["publish_ns"], lo, hi), 1),
        "published": published,
        "publish_outcomes": outcomes,
        "acked": len(acked_ids),
        "ack_rows": len(acks),
        "leftover": len(leftover_ids),
        "planned": planned,
        "fell_behind": published < planned / 2,
        "lag_at_end_s": None if last is None else round((pub["publish_ns"][last] - pub["intended_ns"][last]) / 1e9, 2),
        "accounting_ok": (
            len(acks) == len(acked_ids)
            and acked_ids | leftover_ids == published_ids
            and not acked_ids & leftover_ids
            and set(outcomes) <= {"confirmed", "sent"}
        ),
        "worker_processes": len(set(pub["worker"]) | set(dlv["worker"])),
        "users_per_worker": sorted(
            [
                len({p for w2, p in zip(pub["worker"], pub["producer"]) if w2 == w}),
                len({c for w2, c in zip(dlv["worker"], dlv["consumer"]) if w2 == w}),
            ]
            for w in set(pub["worker"]) | set(dlv["worker"])
        ),
        "window_ns": (lo, hi),
    }


def sojourn_run(url: str, seconds: float, users: int = 1, processes: int = 0) -> dict:
    """One `sojourn run --no-analyze` at the maximum rate; its rate, lag, accounting and CPU."""
    work = Path(tempfile.mkdtemp(prefix="sojourn-bench-e2e-"))
    scenario = work / "bench-e2e.yaml"
    scenario.write_text(
        SCENARIO.format(
            queue=_queue_name("e2e"),
            seconds=seconds,
            warmup=warmup_for(seconds),
            users=users,
            rate=MAX_RATE,
            size=BODY_BYTES,
            window=CONFIRM_WINDOW,
            prefetch=PREFETCH,
        )
    )
    cmd = [
        str(Path(sys.executable).parent / "sojourn"),
        "run",
        str(scenario),
        "--out",
        str(work / "run"),
        "--no-analyze",
        "--set",
        f"broker.url={url}",
    ]
    if processes:
        cmd += ["--processes", str(processes)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = CpuSampler([proc.pid]).start()
    try:
        _out, err = proc.communicate(timeout=seconds * 4 + 180)
    finally:
        if proc.poll() is None:
            proc.kill()
        sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"sojourn run failed ({proc.returncode}), kept in {work}: {err[-2000:]}")
    facts = run_facts(work / "run")
    facts.update(sampler.cores(*facts.pop("window_ns")))
    if facts["accounting_ok"]:
        shutil.rmtree(work, ignore_errors=True)
    else:  # the evidence stays: `sojourn analyze` on it says which messages and why
        facts["kept_in"] = str(work)
        sys.stderr.write(f"benchmarks: a run's accounting did not close; kept in {work}\n")
    return facts


# --- the comparisons ---------------------------------------------------------------------------


def _med(rows: list[dict], key: str):
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


VARIANTS = ("bare", "sojourn", "sojourn-2p")  # sojourn-2p: --processes 2, producer and consumer apart like the pair


def run_end_to_end(url: str, seconds: float, rounds: int, log=print) -> dict:
    trials: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:  # no side always goes first
            if variant == "bare":
                row = bare_pair(url, seconds)
            else:
                row = sojourn_run(url, seconds, processes=2 if variant == "sojourn-2p" else 0)
            trials[variant].append(row)
            log(f"  end-to-end round {r + 1} {variant}: {row['per_s']:.0f} msg/s")
    med = {v: round(statistics.median(t["per_s"] for t in rows)) for v, rows in trials.items()}
    runs = trials["sojourn"] + trials["sojourn-2p"]
    return {
        "name": "end-to-end",
        "kind": "end-to-end",
        "rounds": rounds,
        "seconds": seconds,
        "warmup_s": warmup_for(seconds),
        "per_s": {v: [t["per_s"] for t in rows] for v, rows in trials.items()},
        "median_per_s": med,
        "ratio_vs_bare": {v: round(med[v] / med["bare"], 3) if med["bare"] else None for v in VARIANTS[1:]},
        "producer_fell_behind": all(t["fell_behind"] for t in runs),
        "median_publish_per_s": {v: _med(trials[v], "publish_per_s") for v in VARIANTS[1:]},
        "median_lag_at_end_s": _med(runs, "lag_at_end_s"),
        "accounting_ok": all(t["accounting_ok"] for t in runs),
        "cpu": {v: {k: _med(rows, k) for k in CPU_KEYS} for v, rows in trials.items()},
        "trials": trials,
    }


def run_scaling(
    url: str, seconds: float, rounds: int, processes: tuple[int, ...] = (1, 2, 4), users: int = 4, log=print
) -> dict:
    trials: dict[int, list[dict]] = {n: [] for n in processes}
    for r in range(rounds):
        shift = r % len(processes)
        for n in processes[shift:] + processes[:shift]:  # each count takes each position in turn
            row = sojourn_run(url, seconds, users=users, processes=n)
            trials[n].append(row)
            log(
                f"  scaling round {r + 1} --processes {n}: {row['per_s']:.0f} msg/s, broker "
                f"{row['broker_cores']} cores, load generator {row['loadgen_cores']}, machine "
                f"{row['machine_busy_cores']}"
            )
    rows = []
    base = statistics.median(t["per_s"] for t in trials[processes[0]])
    for n in processes:
        ts = trials[n]
        m = statistics.median(t["per_s"] for t in ts)
        rows.append(
            {
                "processes": n,
                "median_per_s": round(m),
                "ratio_vs_first": round(m / base, 3) if base else None,
                "median_publish_per_s": _med(ts, "publish_per_s"),
                **{k: _med(ts, k) for k in CPU_KEYS},
                "worker_processes": max(t["worker_processes"] for t in ts),
                "users_per_worker": ts[0]["users_per_worker"],
                "accounting_ok": all(t["accounting_ok"] for t in ts),
                "per_s": [t["per_s"] for t in ts],
            }
        )
    return {
        "name": "scaling",
        "kind": "scaling",
        "rounds": rounds,
        "seconds": seconds,
        "warmup_s": warmup_for(seconds),
        "users": users,
        "rows": rows,
        "trials": {str(n): ts for n, ts in trials.items()},
    }
