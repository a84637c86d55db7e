"""`python -m benchmarks`: sojourn's load paths against a bare pika script, side by side.

Each comparison runs its variants alternately (A, B, A, B, ...), each trial in a fresh
gevent process (benchmarks.trial), on the same broker; the report gives the median
msg/s per variant and the median of each round's own ratio, with the interval that holds it
and a verdict against the target (benchmarks.stats), so load from other work on the machine
hits both sides alike. Results go to docs/benchmarks.md (regenerated, with the date and
the machine) and to a JSON file.

    python -m benchmarks                           # every comparison: 9 rounds of 2 s, 5 of each run
    python -m benchmarks --only publish --rounds 3 # the comparison 'publish' (its whole name: it alone)
    python -m benchmarks --only metrics --rounds 9 # every comparison whose name contains 'metrics'
    python -m benchmarks --seconds 0.2 --rounds 1 --json /tmp/b.json --no-docs   # the smoke test
    python -m benchmarks --only end-to-end --run-seconds 8 --run-rounds 3  # sojourn run vs the bare pair
    python -m benchmarks --only scaling --run-seconds 8 --run-rounds 3     # --processes 1, 2, 4
    python -m benchmarks --only flush-stall --rounds 5                 # a trace flush vs the event loop
    python -m benchmarks analysis                  # sojourn analyze vs DuckDB and pandas: benchmarks.analysis

`end-to-end` and `scaling` (benchmarks.endtoend) run the real `sojourn run` CLI, each trial
`--run-seconds` long. With --only, the rows not rerun are kept from the existing JSON file,
so the regenerated report still shows every comparison (each row says when it was measured);
`--report-only` regenerates the report from the JSON file without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import endtoend
from benchmarks.netem import DEFAULT_URL, _repo, machine_facts
from benchmarks.stats import median_interval, paired, verdict
from loadgen.trace.writer import CHUNK_ROWS

# The loop paths' queue, one per `python -m benchmarks` (its trials find it in the environment): two
# benchmarks, or a benchmark and the test suite's smoke test, on one broker purged and drained each
# other's queue, and a consume trial then waited out its limit. Deleted when the command ends.
QUEUE = os.environ.setdefault("SOJOURN_BENCH_QUEUE", f"sojourn.bench.loadpath.{os.getpid()}")
CONSUME_RATE_GUESS = 16_000  # msg/s: sizes the prefilled queue so a consume trial lasts about --seconds

# name -> (trial kind, parameters, variants). Variants: bare pika, sojourn traced, sojourn untraced.
COMPARISONS: dict[str, tuple[str, dict, tuple[str, ...]]] = {
    "publish": ("publish", {"confirm_window": 0}, ("bare", "sojourn", "sojourn-notrace")),
    "publish-confirms-100": ("publish", {"confirm_window": 100}, ("bare", "sojourn", "sojourn-notrace")),
    "consume-prefetch-1": ("consume", {"prefetch": 1}, ("bare", "sojourn", "sojourn-notrace")),
    "consume-prefetch-100": ("consume", {"prefetch": 100}, ("bare", "sojourn", "sojourn-notrace")),
    "consume-prefetch-300": ("consume", {"prefetch": 300}, ("bare", "sojourn", "sojourn-notrace")),
    # kernel receive stamps (recvmsg + SO_TIMESTAMPNS) against stamps taken at the read
    "consume-kstamp-prefetch-100": ("consume", {"prefetch": 100}, ("sojourn", "sojourn-readstamp")),
    # live metrics (--metrics-port) and one more request listener, each against the same traced loop
    "publish-confirms-100-metrics": (
        "publish",
        {"confirm_window": 100},
        ("bare", "sojourn", "sojourn-metrics", "sojourn-listener"),
    ),
    "consume-prefetch-100-metrics": (
        "consume",
        {"prefetch": 100},
        ("bare", "sojourn", "sojourn-metrics", "sojourn-listener"),
    ),
}
EXTRAS = ("sojourn-metrics", "sojourn-listener")  # the rows of _render_extras, against sojourn
RUN_COMPARISONS = ("end-to-end", "scaling")  # whole `sojourn run`s: benchmarks.endtoend
RATIO_TARGET = 0.9  # sojourn / bare, at least (issue 8)
OVERHEAD_TARGET = 0.05  # tracing overhead, at most
METRICS_TARGET = 0.02  # live metrics' cost against the same traced loop, at most (issue 51)
STALL = "flush-stall"  # how long a trace flush holds the event loop: benchmarks.stall
STALL_VARIANTS = ("none", "one-call", "as-appended")
STALL_ROWS = 17_000  # a second of deliveries at the consume-prefetch-300 rate
ANALYSIS = "analysis"  # sojourn analyze against DuckDB and pandas: benchmarks.analysis
EVERY = [*COMPARISONS, *RUN_COMPARISONS, STALL, ANALYSIS]  # the report's order


def _versions() -> dict:
    from importlib.metadata import version

    out = {}
    for pkg in ("pika", "gevent", "locust", "pyarrow"):
        try:
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            out[pkg] = None
    return out


def _broker_version(url: str) -> str | None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        value = (conn._impl.server_properties or {}).get("version")
        return value.decode() if isinstance(value, bytes) else value
    finally:
        conn.close()


def _prepare(url: str, messages: int = 0) -> None:
    """Declare and empty the benchmark queue; put `messages` messages carrying sojourn's headers in it."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(QUEUE)
    ch.queue_purge(QUEUE)
    body = b"x" * 100
    now = time.time_ns()
    for i in range(messages):
        ch.basic_publish(
            "",
            QUEUE,
            body,
            pika.BasicProperties(
                delivery_mode=1,
                message_id=f"bench:p:{i}",
                headers={"sojourn-id": f"bench:p:{i}", "sojourn-pub-ns": now},
            ),
        )
    deadline = time.monotonic() + 60
    while ch.queue_declare(QUEUE, passive=True).method.message_count < messages and time.monotonic() < deadline:
        time.sleep(0.05)
    conn.close()


def _trial(spec: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.trial", json.dumps(spec)],
        cwd=_repo(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"trial {spec} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_comparison(name: str, url: str, seconds: float, rounds: int) -> dict:
    kind, params, variants = COMPARISONS[name]
    rates: dict[str, list[float]] = {v: [] for v in variants}
    cpu_us: dict[str, list[float]] = {v: [] for v in variants}
    child_us: dict[str, list[float]] = {v: [] for v in variants}
    after_us: dict[str, list[float]] = {v: [] for v in variants}
    gc_us: dict[str, list[float]] = {v: [] for v in variants}
    gc_worst_ms: dict[str, list[float]] = {v: [] for v in variants}
    machine_us: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds):
        order = variants if r % 2 == 0 else tuple(reversed(variants))  # no side always goes first
        for variant in order:
            spec = {"kind": kind, "variant": variant, "url": url, "seconds": seconds, **params}
            if kind == "consume":
                spec["messages"] = max(200, int(CONSUME_RATE_GUESS * seconds))
                _prepare(url, spec["messages"])
            else:
                _prepare(url)
            out = _trial(spec)
            rates[variant].append(out["per_s"])
            cpu_us[variant].append(out["cpu_us"])
            child_us[variant].append(out["child_cpu_us"])
            after_us[variant].append(out["child_after_us"])
            gc_us[variant].append(out["gc_us"])
            gc_worst_ms[variant].append(out["gc_worst_ms"])
            machine_us[variant].append(out["machine_cpu_us"])
    _prepare(url)
    med = {v: statistics.median(x) for v, x in rates.items()}
    result = {
        "name": name,
        "kind": kind,
        **params,
        "rounds": rounds,
        "seconds": seconds,
        "per_s": rates,
        "median_per_s": {v: round(m) for v, m in med.items()},
        # CPU microseconds per message in each trial's measured window: the loop's own process,
        # and the trace writer's child (0 for bare and untraced, which have none)
        "cpu_us": cpu_us,
        "median_cpu_us": {v: round(statistics.median(x), 1) for v, x in cpu_us.items()},
        "median_child_cpu_us": {v: round(statistics.median(x), 1) for v, x in child_us.items()},
        # the same child's CPU after the window, converting the batches it spilled during it
        "median_child_after_us": {v: round(statistics.median(x), 1) for v, x in after_us.items()},
        # the garbage collector's pauses of the loop's process: us per message (median), the
        # longest single pause of any trial (ms)
        "median_gc_us": {v: round(statistics.median(x), 2) for v, x in gc_us.items()},
        "gc_worst_ms": {v: max(x) for v, x in gc_worst_ms.items()},
        # the whole machine's busy CPU (broker, loop, writer, anything else) per message
        "machine_cpu_us": machine_us,
        "median_machine_cpu_us": {v: round(statistics.median(x), 1) for v, x in machine_us.items()},
    }
    # The ratios are taken within each round, between trials run back to back, and their median
    # reported: the machine drifts between rounds (the broker's state, other load), and a ratio of
    # medians taken from different rounds mixes that drift in. Every round's ratio is kept too.
    # benchmarks.stats says how far each median can be trusted (an interval, and a verdict).
    if "sojourn" in rates and "bare" in rates:
        result["ratio_vs_bare_rounds"] = paired(rates["sojourn"], rates["bare"])
        result["ratio_vs_bare"] = round(statistics.median(result["ratio_vs_bare_rounds"]), 3)
        result["ratio_vs_bare_verdict"] = verdict(result["ratio_vs_bare_rounds"], RATIO_TARGET, True)
    # Tracing (against a writer that drops rows) and kernel receive stamps (against stamps at the
    # read): each cost in msg/s, and in the machine's CPU per message, what it takes from the 2
    # cores (the broker's included), steadier than the rates, which the broker's pace also moves.
    for name, baseline in (("tracing", "sojourn-notrace"), ("kstamp", "sojourn-readstamp")):
        if "sojourn" in rates and baseline in rates:
            result |= _cost(name, rates["sojourn"], rates[baseline], machine_us["sojourn"], machine_us[baseline])
    # live metrics and one more request listener: each against the same traced loop, and against bare
    for extra, name in (("sojourn-metrics", "metrics"), ("sojourn-listener", "listener")):
        if extra in rates and "sojourn" in rates:
            result |= _cost(name, rates[extra], rates["sojourn"], machine_us[extra], machine_us["sojourn"])
            if "bare" in rates:
                result[f"{name}_vs_bare_rounds"] = rounds_ = paired(rates[extra], rates["bare"])
                result[f"{name}_vs_bare"] = round(statistics.median(rounds_), 3)
    return result


def _cost(name: str, rates: list, base_rates: list, cpu_us: list, base_cpu_us: list) -> dict:
    """`<name>_overhead` (1 - msg/s against the baseline's) and `<name>_cpu` (machine CPU per
    message, over the baseline's, - 1): each round's, their median and its verdict."""
    out: dict = {}
    for key, rounds in (
        (f"{name}_overhead", [round(1 - x, 3) for x in paired(rates, base_rates)]),
        (f"{name}_cpu", [round(x - 1, 3) for x in paired(cpu_us, base_cpu_us)]),
    ):
        out[f"{key}_rounds"] = rounds
        out[key] = round(statistics.median(rounds), 3)
        out[f"{key}_verdict"] = verdict(rounds, _target(name), False)
    return out


def _target(name: str) -> float:
    return METRICS_TARGET if name == "metrics" else OVERHEAD_TARGET


def _spread(values: list[float] | None, fmt) -> str:
    """[the median's interval, its probability], or nothing for an older row without rounds."""
    interval = median_interval(values or [])
    if interval is None:
        return ""
    low, high, p = interval
    return f" [{fmt(low)} to {fmt(high)}, {p * 100:.0f} %]"


def _judged(r: dict, key: str, fmt, target: float, higher_is_better: bool) -> str:
    """A row's median, its interval and the verdict against `target` (– when not measured)."""
    value, rounds = r.get(key), r.get(f"{key}_rounds")
    if value is None:
        return "–"
    said = r.get(f"{key}_verdict") or (verdict(rounds, target, higher_is_better) if rounds else "")
    return f"{fmt(value)}{_spread(rounds, fmt)}{f' {said}' if said else ''}"


def _loop_cpu(r: dict) -> str:
    """bare / sojourn (+ trace writer child; + its conversion after the load) / untraced CPU us per
    message, or ? for an older row."""
    cpu, child = r.get("median_cpu_us"), r.get("median_child_cpu_us") or {}
    after = (r.get("median_child_after_us") or {}).get("sojourn")
    if not cpu:
        return "?"
    later = f"; + {after:.1f} after" if after is not None else ""
    sojourn = f"{cpu['sojourn']:.1f} (+ {child.get('sojourn', 0):.1f}{later})" if "sojourn" in cpu else "–"
    return " / ".join(
        (
            f"{cpu['bare']:.1f}" if "bare" in cpu else "–",
            sojourn,
            f"{cpu['sojourn-notrace']:.1f}" if "sojourn-notrace" in cpu else "–",
        )
    )


def _gc(r: dict) -> str:
    """bare / sojourn / untraced collector time per message (longest pause), or ? for an older row."""
    per, worst = r.get("median_gc_us"), r.get("gc_worst_ms")
    if not per:
        return "?"
    return " / ".join(
        f"{per[v]:.2f} ({worst[v]:.1f})" if v in per else "–" for v in ("bare", "sojourn", "sojourn-notrace")
    )


def run_stall(rounds: int, flushes: int = 5) -> dict:
    """The flush-stall trials, variants alternated, each in its own process."""
    trials: dict[str, list[dict]] = {v: [] for v in STALL_VARIANTS}
    for r in range(rounds):
        for variant in STALL_VARIANTS if r % 2 == 0 else tuple(reversed(STALL_VARIANTS)):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.stall",
                    json.dumps({"variant": variant, "rows": STALL_ROWS, "flushes": flushes}),
                ],
                cwd=_repo(),
                capture_output=True,
                text=True,
                timeout=300,
            )
            if out.returncode != 0:
                raise RuntimeError(f"stall trial {variant} failed:\n{out.stderr[-2000:]}")
            trials[variant].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "name": STALL,
        "rounds": rounds,
        "rows": STALL_ROWS,
        "flushes": flushes,
        "trials": trials,
        "median": {
            v: {k: statistics.median(t[k] for t in ts) for k in ("worst_ms", "p99_ms", "flush_call_ms")}
            for v, ts in trials.items()
        },
    }


def _render_stall(r: dict) -> list[str]:
    labels = {
        "none": "rows dropped (the probe and the appends alone)",
        "one-call": "rows kept as tuples, serialised in one call by the flush",
        "as-appended": f"as runs do it: serialised {CHUNK_ROWS} rows at a time as they are appended",
        "chunked": "(before: 1,000 rows per call at the flush, the loop turning between calls)",
    }
    lines = [
        "",
        f"### Tracing and the event loop{_when(r)}",
        "",
        f"A probe greenlet sleeps 0.5 ms at a time and records how late it wakes while the process appends "
        f"{r['rows']:,} delivery rows (a second at about the consume-prefetch-300 rate; 20 rows between two "
        f"turns of the loop) and flushes them to the trace writer's child, {r['flushes']} flushes per trial, "
        f"{r['rounds']} trials per variant alternated (`benchmarks/stall.py`); medians over the trials.",
        "",
        "| variant | probe's worst lateness, ms | its 99th percentile, ms | flush call in the caller, ms |",
        "|---|---|---|---|",
    ]
    for v, label in labels.items():
        m = r["median"].get(v)
        if m:
            lines.append(f"| {label} | {m['worst_ms']:.1f} | {m['p99_ms']:.1f} | {m['flush_call_ms']:.1f} |")
    return lines


def _when(r: dict) -> str:
    """A row kept from an earlier invocation says when it was measured."""
    return f" ({r['measured']})" if r.get("measured") else ""


def _num(x, spec: str) -> str:
    return "?" if x is None else format(x, spec)


def _us_per_msg(c: dict, per_s) -> str:
    """CPU microseconds per acked message: broker / load generator."""
    return " / ".join(
        "?" if c.get(k) is None or not per_s else f"{c[k] / per_s * 1e6:.0f}" for k in ("broker_cores", "loadgen_cores")
    )


def _cores(c: dict) -> str:
    return " / ".join(
        "?" if c.get(k) is None else f"{c[k]:.2f}"
        for k in ("broker_cores", "loadgen_cores", "busiest_process_cores", "machine_busy_cores")
    )


def _render_runs(results: list[dict]) -> list[str]:
    lines: list[str] = []
    for r in results:
        if r["name"] == "end-to-end":
            m, cpu = r["median_per_s"], r["cpu"]
            lines += [
                "",
                f"### End to end: `sojourn run` against the bare pair{_when(r)}",
                "",
                f"{r['rounds']} rounds alternating the variants, {r['seconds']:g} s of publishing each; the rate is "
                f"acks per second at the consumer over [{r['warmup_s']:g} s, {r['seconds']:g} s] of the publishing "
                "time (warm-up and drain left out), by the wall-clock time of each ack. *bare*: a pika publisher "
                f"(confirms, window {endtoend.CONFIRM_WINDOW}) and a pika consumer (manual ack, prefetch "
                f"{endtoend.PREFETCH}) as two processes on one queue, {endtoend.BODY_BYTES}-byte messages. *sojourn*: "
                "`sojourn run --no-analyze` (in one process, the default, and with `--processes 2`, where Locust puts "
                "the producer and the consumer in two worker processes as the pair has them) of a scenario with "
                "one producer at "
                f"{endtoend.MAX_RATE:,} msg/s and one consumer with the same settings, counted from its delivery "
                "trace (`settle_ns` of the acks). CPU in cores (CPU seconds per second) over the same window: "
                "broker (beam.smp) / load generator (the pair, or the run's process tree) / the busiest process of "
                "the load generator (1.00 is a process bound by its one core) / whole machine.",
                "",
                "| variant | acked msg/s (median) | / bare | per round | published msg/s | CPU cores: broker / load "
                "generator / its busiest process / machine | CPU us per message: broker / load generator |",
                "|---|---|---|---|---|---|---|",
            ]
            labels = {"bare": "bare pair", "sojourn": "sojourn run", "sojourn-2p": "sojourn run --processes 2"}
            for v, label in labels.items():
                if v in m:
                    ratio = "1" if v == "bare" else _num(r["ratio_vs_bare"].get(v), ".2f")
                    lines.append(
                        f"| {label} | {m[v]} | {ratio} | {', '.join(f'{x:.0f}' for x in r['per_s'][v])} "
                        f"| {_num(r['median_publish_per_s'].get(v), '.0f') if v != 'bare' else '–'} "
                        f"| {_cores(cpu[v])} | {_us_per_msg(cpu[v], m[v])} |"
                    )
            lines += [
                "",
                "The producer "
                f"{'fell behind in every round' if r['producer_fell_behind'] else 'did NOT fall behind in every round'}"
                f" (at its last publish it was {_num(r['median_lag_at_end_s'], 'g')} s behind its schedule, median); "
                "accounting from the traces (every published message acked once or left in the queue, no other "
                f"outcome): {'sane in every run' if r['accounting_ok'] else '**NOT sane** (see the JSON)'}.",
            ]
        elif r["name"] == "scaling":
            lines += [
                "",
                f"### Scaling with `--processes`{_when(r)}",
                "",
                f"The same kind of scenario with {r['users']} producers and {r['users']} consumers (so every worker "
                f"process gets users at 4 processes), run with `--processes N`; {r['rounds']} rounds, the order of "
                f"the process counts rotating each round, {r['seconds']:g} s of publishing each, acks per second "
                f"over [{r['warmup_s']:g} s, {r['seconds']:g} s]. CPU in cores over that window.",
                "",
                f"| --processes | acked msg/s (median) | vs {r['rows'][0]['processes']} | published msg/s "
                "| CPU cores: broker | load generator | its busiest process "
                "| machine busy | CPU us per message: broker / load generator | producers, consumers per process "
                "| accounting |",
                "|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for row in r["rows"]:
                lines.append(
                    f"| {row['processes']} | {row['median_per_s']} | {_num(row['ratio_vs_first'], '.2f')} "
                    f"| {_num(row['median_publish_per_s'], '.0f')} | {row['broker_cores']} | {row['loadgen_cores']} "
                    f"| {row.get('busiest_process_cores', '?')} "
                    f"| {row['machine_busy_cores']} | {_us_per_msg(row, row['median_per_s'])} "
                    f"| {' / '.join(f'{p}p {c}c' for p, c in row['users_per_worker'])} "
                    f"| {'sane' if row['accounting_ok'] else 'NOT sane'} |"
                )
    return lines


def _render_kstamp(results: list[dict]) -> list[str]:
    """What kernel receive stamps cost a traced consumer: the same consumer with stamps at the read."""
    if not results:
        return []
    percent = lambda x: f"{x * 100:.1f} %"  # noqa: E731
    lines = [
        "",
        "Kernel receive stamps (`loadgen/amqp/kstamp.py`: `recvmsg` with `SO_TIMESTAMPNS` instead of "
        "`recv`) against the same traced consumer stamping at the read (*readstamp*), paired by round:",
        "",
        "| comparison | rounds x s | sojourn msg/s | readstamp msg/s | cost, msg/s (target <= 5 %) "
        "| cost, machine CPU per message |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r["median_per_s"]
        cpu = r.get("kstamp_cpu")
        lines.append(
            f"| {r['name']}{_when(r)} | {r['rounds']} x {r['seconds']:g} | {m.get('sojourn', '–')} "
            f"| {m.get('sojourn-readstamp', '–')} | {_judged(r, 'kstamp_overhead', percent, OVERHEAD_TARGET, False)} "
            f"| {percent(cpu) if cpu is not None else '–'} |"
        )
    return lines


def _render_extras(results: list[dict]) -> list[str]:
    """What live metrics and one more request listener cost the traced loop, paired by round."""
    if not results:
        return []
    percent = lambda x: f"{x * 100:.1f} %"  # noqa: E731
    ratio = lambda x: f"{x:.2f}"  # noqa: E731
    lines = [
        "",
        "Live metrics (`--metrics-port`: the trace writer's process folds each batch of rows into them; "
        "nothing scrapes in the trial) and one more `request` listener (a counter: every message then "
        "reaches it, in batches, loadgen/run/locust_stats.py), each against the same traced loop "
        "(*sojourn*) and against bare pika, paired by round:",
        "",
        "| comparison | rounds x s | bare msg/s | sojourn msg/s | metrics msg/s | listener msg/s "
        "| sojourn / bare | metrics / bare | metrics' cost, msg/s (target <= 2 %) | metrics, machine CPU per message "
        "| listener's cost, msg/s | listener, machine CPU per message |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r["median_per_s"]
        lines.append(
            f"| {r['name']}{_when(r)} | {r['rounds']} x {r['seconds']:g} | {m.get('bare', '–')} "
            f"| {m.get('sojourn', '–')} | {m.get('sojourn-metrics', '–')} | {m.get('sojourn-listener', '–')} "
            f"| {_judged(r, 'ratio_vs_bare', ratio, RATIO_TARGET, True)} "
            f"| {_judged(r, 'metrics_vs_bare', ratio, RATIO_TARGET, True)} "
            f"| {_judged(r, 'metrics_overhead', percent, METRICS_TARGET, False)} "
            f"| {_judged(r, 'metrics_cpu', percent, METRICS_TARGET, False)} "
            f"| {_judged(r, 'listener_overhead', percent, OVERHEAD_TARGET, False)} "
            f"| {_judged(r, 'listener_cpu', percent, OVERHEAD_TARGET, False)} |"
        )
    return lines


def render(facts: dict, results: list[dict]) -> str:
    v = facts["versions"]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python -m benchmarks` (do not edit by hand: the notes below the table come from "
        "`benchmarks/NOTES.md`).",
        "",
        f"{facts['date']} on {facts['host']}: {facts['cpus']} x {facts['cpu']}, Python {facts['python']}, "
        f"Linux {facts['kernel']}, RabbitMQ {facts.get('broker') or '?'} on the same machine; pika {v['pika']}, "
        f"gevent {v['gevent']}, Locust {v['locust']}, pyarrow {v['pyarrow']}. Load average at the start "
        f"{facts['loadavg_1m']:.2f} (other work shares the machine: compare ratios, not absolute rates).",
        "",
        "Each row alternates its variants for the stated rounds, each trial a fresh gevent process "
        "(`benchmarks/trial.py`); numbers are medians. The two ratios are taken within each round, between "
        "trials run back to back, and the median of the rounds' ratios is shown with, in brackets, the "
        "interval that holds the true median with the stated probability (`benchmarks/stats.py`: the "
        "order statistics of the rounds). A target is *met* or *missed* only when that whole interval is on "
        "one side of it; otherwise the verdict is the median's, *not resolved*: the rounds can not tell. "
        "*bare* is a pika GeventConnection script doing the same "
        "work (100-byte messages, one connection, no Locust, no tracing); *sojourn* is loadgen's Producer or "
        "Consumer with its RunContext, Parquet trace writer and Locust's request event; *untraced* is the same "
        "with a trace writer that drops rows. A publish counts once its bytes left the client (both loops wait "
        "while pika's write buffer holds more than 256 KiB; the clock stops when it is empty) or, with "
        "confirms, once its confirm arrived. Consumers ack each delivery (manual ack, no processing time). "
        "*Tracing, machine CPU* is how much more of the whole machine's CPU (the broker's included) a traced "
        "message took than an untraced one, paired by round like the rates.",
        "",
        "| comparison | rounds x s | bare msg/s | sojourn msg/s | untraced msg/s | sojourn / bare (target >= 0.9) "
        "| tracing overhead, msg/s (target <= 5 %) | tracing, machine CPU per message "
        "| CPU us per message: bare / sojourn (+ its trace writer; + converting after the load) / untraced "
        "| garbage collection, us per message (longest pause, ms): bare / sojourn / untraced |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    percent = lambda x: f"{x * 100:.1f} %"  # noqa: E731
    special = ("sojourn-readstamp", *EXTRAS)  # rows of their own tables, below
    for r in (r for r in results if r["name"] in COMPARISONS and not set(special) & set(r["median_per_s"])):
        m = r["median_per_s"]
        lines.append(
            f"| {r['name']}{_when(r)} | {r['rounds']} x {r['seconds']:g} | {m.get('bare', '–')} "
            f"| {m.get('sojourn', '–')} | {m.get('sojourn-notrace', '–')} "
            f"| {_judged(r, 'ratio_vs_bare', lambda x: f'{x:.2f}', RATIO_TARGET, True)} "
            f"| {_judged(r, 'tracing_overhead', percent, OVERHEAD_TARGET, False)} "
            f"| {_judged(r, 'tracing_cpu', percent, OVERHEAD_TARGET, False)} "
            f"| {_loop_cpu(r)} | {_gc(r)} |"
        )
    lines += _render_runs(results)
    lines += _render_kstamp([r for r in results if "sojourn-readstamp" in r.get("median_per_s", {})])
    lines += _render_extras([r for r in results if set(EXTRAS) & set(r.get("median_per_s", {}))])
    for r in results:
        if r["name"] == STALL:
            lines += _render_stall(r)
        if r["name"] == ANALYSIS:
            from benchmarks.analysis import render as render_analysis

            lines += render_analysis(r)
    notes = Path(__file__).with_name("NOTES.md")  # the findings and the fixes, kept by hand
    lines += ["", notes.read_text() if notes.exists() else ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["analysis"]:
        from benchmarks import analysis

        return analysis.main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per trial (default 2)")
    p.add_argument(
        "--rounds",
        type=int,
        default=9,
        help="trials per variant, alternated (default 9: the median's interval then holds it with 96 %%)",
    )
    p.add_argument(
        "--only", metavar="NAME", help="run the comparison named NAME, or else every one whose name contains NAME"
    )
    p.add_argument("--url", default=os.environ.get("SOJOURN_AMQP_URL") or DEFAULT_URL)
    p.add_argument(
        "--json",
        metavar="PATH",
        default=str(Path(_repo(), "benchmarks", "results.json")),
        help="where to write the results as JSON (default benchmarks/results.json)",
    )
    p.add_argument(
        "--docs",
        metavar="PATH",
        default=str(Path(_repo(), "docs", "benchmarks.md")),
        help="the Markdown report to regenerate (default docs/benchmarks.md)",
    )
    p.add_argument("--no-docs", action="store_true", help="do not rewrite the Markdown report")
    p.add_argument(
        "--run-seconds", type=float, default=8.0, help="publishing time per trial of end-to-end and scaling (default 8)"
    )
    p.add_argument(
        "--run-rounds",
        type=int,
        default=5,
        help="rounds of end-to-end and scaling, each a whole `sojourn run` per variant (default 5)",
    )
    p.add_argument(
        "--processes",
        default="1,2,4",
        metavar="N,N,...",
        help="scaling: the --processes values to compare (default 1,2,4)",
    )
    p.add_argument("--users", type=int, default=4, help="scaling: producers and consumers in the scenario (default 4)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="one round, 0.2 s trials, 1 s runs, scaling with 1 process only: checks that it all runs",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: regenerate the Markdown report from the JSON file (after editing NOTES.md)",
    )
    args = p.parse_args(argv)
    if args.report_only:
        data = json.loads(Path(args.json).read_text())
        Path(args.docs).write_text(render(data["machine"], data["results"]))
        return 0
    if args.quick:
        args.rounds, args.run_rounds, args.seconds, args.run_seconds, args.processes = 1, 1, 0.2, 1.0, "1"
    try:
        process_counts = tuple(int(x) for x in args.processes.split(",") if x.strip())
    except ValueError:
        p.error(f"--processes: expected comma-separated whole numbers, got {args.processes!r}")
    if not process_counts or min(process_counts) < 1:
        p.error(f"--processes: expected counts >= 1, got {args.processes!r}")
    every = [*COMPARISONS, *RUN_COMPARISONS, STALL]
    # a comparison's own name selects it alone; otherwise every name containing the text
    names = [args.only] if args.only in every else [n for n in every if not args.only or args.only in n]
    if not names:
        p.error(
            f"--only {args.only!r} matches none of {', '.join(every)} (the analysis benchmark is "
            "`python -m benchmarks analysis`)"
        )
    facts = {**machine_facts(), "versions": _versions(), "broker": _broker_version(args.url)}
    results = []
    try:
        _measure(args, names, process_counts, results)
    finally:
        _delete_queue(args.url)
    for r in results:
        r["load_1m_after"] = round(os.getloadavg()[0], 2)
    merge_and_write(Path(args.json), None if args.no_docs else Path(args.docs), results, facts)
    return 0


def merge_and_write(json_path: Path, docs: Path | None, fresh: list[dict], facts: dict) -> None:
    """Keep the rows of the JSON file that were not rerun (the analysis row when the loop paths
    were measured, and the other way round), write it, and regenerate the report."""
    results = _merge(json_path, fresh, EVERY)
    try:  # what this measurement did not look up (the broker's version, say) stays as it was
        facts = {**json.loads(json_path.read_text()).get("machine", {}), **facts}
    except (OSError, ValueError):
        pass
    facts.setdefault("versions", _versions())
    json_path.write_text(json.dumps({"machine": facts, "results": results}, indent=2) + "\n")
    if docs is not None:
        docs.write_text(render(facts, results))


def _delete_queue(url: str) -> None:
    try:
        endtoend._declare(url, QUEUE, delete=True)
    except Exception:  # noqa: BLE001 - the broker is gone: nothing to clean up there
        pass


def _measure(args, names: list[str], process_counts: tuple[int, ...], results: list[dict]) -> None:
    """Run the comparisons `names`, appending each one's result to `results` as it ends."""
    for name in names:
        if name == "end-to-end":
            results.append(endtoend.run_end_to_end(args.url, args.run_seconds, args.run_rounds))
            r = results[-1]
            print(
                f"{name}: "
                + ", ".join(f"{v} {x} msg/s" for v, x in r["median_per_s"].items())
                + f"; vs bare {r['ratio_vs_bare']}; producer fell behind {r['producer_fell_behind']}, "
                f"accounting ok {r['accounting_ok']}",
                flush=True,
            )
            continue
        if name == STALL:
            results.append(run_stall(1, flushes=2) if args.quick else run_stall(args.rounds))
            print(
                f"{name}: "
                + ", ".join(
                    f"{v} worst {m['worst_ms']} ms p99 {m['p99_ms']} ms" for v, m in results[-1]["median"].items()
                ),
                flush=True,
            )
            continue
        if name == "scaling":
            results.append(
                endtoend.run_scaling(args.url, args.run_seconds, args.run_rounds, process_counts, args.users)
            )
            print(
                f"{name}: "
                + ", ".join(
                    f"{row['processes']} -> {row['median_per_s']} msg/s ({row['ratio_vs_first']})"
                    for row in results[-1]["rows"]
                ),
                flush=True,
            )
            continue
        results.append(run_comparison(name, args.url, args.seconds, args.rounds))
        print(
            f"{name}: CPU us per message "
            + ", ".join(
                f"{v} {x}" + (f" (+ writer {results[-1]['median_child_cpu_us'][v]})" if v == "sojourn" else "")
                for v, x in results[-1]["median_cpu_us"].items()
            ),
            flush=True,
        )
        m = results[-1]["median_per_s"]
        print(
            f"{name}: "
            + ", ".join(f"{v} {x} msg/s" for v, x in m.items())
            + f"; sojourn/bare {results[-1].get('ratio_vs_bare')}, tracing overhead "
            f"{results[-1].get('tracing_overhead')}",
            flush=True,
        )


def _merge(path: Path, fresh: list[dict], order: list[str]) -> list[dict]:
    """The fresh rows, and the rows of the existing JSON file that were not rerun (marked with their date)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return fresh
    rerun = {r["name"] for r in fresh}
    kept = [
        {**r, "measured": r.get("measured") or old.get("machine", {}).get("date")}
        for r in old.get("results", [])
        if r.get("name") not in rerun
    ]
    rows = {r["name"]: r for r in [*kept, *fresh]}
    return [rows[n] for n in order if n in rows]


if __name__ == "__main__":
    sys.exit(main())
