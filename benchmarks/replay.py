"""`python -m benchmarks.replay`: how late a replay publishes, at several rates per worker process.

For each rate a constant-gap replay file is written and replayed by one producer in one
Locust process (`sojourn run --no-analyze`, confirms off, no consumer: the queue keeps at most
1,000 messages, dropping the oldest), and the publish trace gives the lateness of every publish
(actual - intended send time). A benchmark, not a test: it prints and records the numbers and
exits 0 whatever they are. The target (issue 5): p99 lateness under 1 ms at 2,000 msg/s.

    python -m benchmarks.replay                       # 1,000 / 2,000 / 5,000 / 10,000 msg/s, 10 s each
    python -m benchmarks.replay --rates 2000 --seconds 3
    python -m benchmarks.replay --docs                # also rewrite the table in docs/replay.md
    python -m benchmarks.replay --bursty --docs       # a bursty file, two producers over two processes

`--bursty` replays a two-state Markov-modulated Poisson file instead (quiet at 200 msg/s, bursts
at 3,000 msg/s; exponential spells of 2 s and 1 s on average, seed 1) with two producers
(`split: round_robin`) over `--processes 2`, two consumers, and the analysis: the table is the
summary's own `fidelity` block for the group.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from benchmarks.scratch import scratch_dir

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "replay.md"
RESULTS = REPO / "benchmarks" / "replay-results.json"
START, END = "<!-- replay-bench:start -->", "<!-- replay-bench:end -->"
TARGET = (2000, 1.0)  # at 2,000 msg/s per worker, p99 lateness under 1 ms

SCENARIO = """
name: bench-replay
queue: {{name: sojourn.bench.replay, arguments: {{x-max-length: 1000}}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {duration}, drain_timeout_s: 5}}
producers:
  - name: replay
    confirms: {confirms}
    replay: {{path: {path}}}
"""


BURSTY = {"quiet_rate": 200, "burst_rate": 3000, "quiet_s": 2.0, "burst_s": 1.0, "seed": 1}
BURST_START, BURST_END = "<!-- replay-burst-bench:start -->", "<!-- replay-burst-bench:end -->"

BURSTY_SCENARIO = """
name: bench-replay-bursty
queue: {{name: sojourn.bench.replay-bursty, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {duration}, warmup_s: 0, drain_timeout_s: 30}}
producers:
  - name: replay
    count: 2
    confirms: true
    confirm_window: 500
    replay: {{path: {path}, split: round_robin}}
consumers:
  - {{name: c, count: 2, prefetch: 200, processing_ms: 0.05}}
"""


def bursty_offsets(seconds: float, quiet_rate: float, burst_rate: float, quiet_s: float, burst_s: float, seed: int):
    """Arrival offsets (s) of a two-state Markov-modulated Poisson process over `seconds`:
    exponential spells (means quiet_s, burst_s), Poisson arrivals at the spell's rate."""
    import random

    rng = random.Random(seed)
    t, bursting, out = 0.0, False, []
    while t < seconds:
        spell_end = min(seconds, t + rng.expovariate(1 / (burst_s if bursting else quiet_s)))
        rate = burst_rate if bursting else quiet_rate
        while True:
            t += rng.expovariate(rate)
            if t >= spell_end:
                break
            out.append(t)
        t, bursting = spell_end, not bursting
    return out


def measure_bursty(seconds: float) -> dict:
    """Replay a bursty file with two producers over two worker processes, analyse the run, and
    return its fidelity figures (the summary's `fidelity.replay` block, and the run's counts)."""
    work = Path(scratch_dir("sojourn-bench-bursty-"))
    offsets = bursty_offsets(seconds, **BURSTY)
    with open(work / "trace.csv", "w") as f:
        f.write("offset_s,size_bytes\n")
        f.writelines(f"{t:.6f},100\n" for t in offsets)
    (work / "s.yaml").write_text(BURSTY_SCENARIO.format(duration=seconds + 0.5, path=work / "trace.csv"))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "sojourn"), "run", str(work / "s.yaml"), "--out", str(work / "run")]
        + ["--processes", "2"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=seconds * 10 + 300,
    )
    if result.returncode not in (0, 1):  # 1: an SLO failed; the figures are what is measured
        raise RuntimeError(f"sojourn run failed ({result.returncode}): {result.stderr[-2000:]}")
    summary = json.loads((work / "run" / "summary.json").read_text())
    entry = summary["fidelity"]["replay"]
    replay, late = entry["replay"], entry["lateness_ms"]
    series = replay["per_second"]
    producers = _producers(work / "run")
    return {
        "seconds": seconds,
        "rows": len(offsets),
        "peak_per_s": max(series["intended"]) if series["intended"] else None,
        "producers": producers,
        "published": replay["published"],
        "missing": replay["missing"],
        "duplicates": replay["duplicates"],
        "unaccounted": summary["messages"]["unaccounted"],
        "late_p50_ms": late["p50"],
        "late_p99_ms": late["p99"],
        "late_p999_ms": late.get("p99_9"),
        "late_max_ms": late["max"],
        "per_second_correlation": replay["per_second_correlation"],
        "per_second_max_diff": replay["per_second_max_diff"],
        "ks_distance": replay["inter_arrival_ms"]["ks_distance"],
        "faithful": replay["inter_arrival_ms"]["faithful"],
        "gap_p10_ms": {k: replay["inter_arrival_ms"][k]["p10"] for k in ("intended", "published")},
    }


def _producers(run_dir: Path) -> list[str]:
    import pyarrow.parquet as pq

    names = pq.read_table(run_dir / "traces" / "publish", columns=["producer"]).column("producer").to_pylist()
    return sorted(set(names))


def render_bursty(facts: dict, r: dict) -> str:
    return "\n".join(
        [
            f"Measured {facts['date']} on {facts['host']} ({facts['cores']} cores, Python {facts['python']}, "
            f"load average {facts['load_1m']:.1f} at the start) by `python -m benchmarks.replay --bursty`: "
            f"{r['rows']:,} rows over {r['seconds']:g} s (quiet {BURSTY['quiet_rate']:,} msg/s, bursts "
            f"{BURSTY['burst_rate']:,} msg/s; the busiest second asked for {r['peak_per_s']:,}), two producers "
            f"(`split: round_robin`) over `--processes 2` ({', '.join(r['producers'])}), confirms on, two "
            "consumers; the figures are the analysis' own `fidelity` block.",
            "",
            "| published / missing / duplicates | unaccounted | late p50 / p99 / p99.9 / max ms "
            "| per-second correlation (max abs diff) | gaps p10 ms file / published | KS distance of the gaps |",
            "|---|---|---|---|---|---|",
            f"| {r['published']:,} / {r['missing']} / {r['duplicates']} | {r['unaccounted']} "
            f"| {r['late_p50_ms']:.3f} / {r['late_p99_ms']:.2f} / {r['late_p999_ms']:.2f} / {r['late_max_ms']:.1f} "
            f"| {r['per_second_correlation']:.4f} ({r['per_second_max_diff']:,}) "
            f"| {r['gap_p10_ms']['intended']:.3f} / {r['gap_p10_ms']['published']:.3f} "
            f"| {r['ks_distance']:.3f} ({'within' if r['faithful'] else 'above'} 0.05: "
            f"{'the spacing was kept' if r['faithful'] else 'not judged faithful'}) |",
        ]
    )


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def measure(rate: int, seconds: float, confirms: bool = False) -> dict:
    """Replay `rate` msg/s for `seconds` and return lateness percentiles in ms."""
    import pyarrow.parquet as pq

    work = Path(scratch_dir("sojourn-bench-replay-"))
    n = int(rate * seconds)
    with open(work / "trace.csv", "w") as f:
        f.write("offset_s,size_bytes\n")
        f.writelines(f"{i / rate:.6f},100\n" for i in range(n))
    (work / "s.yaml").write_text(
        SCENARIO.format(duration=seconds + 0.5, confirms=str(confirms).lower(), path=work / "trace.csv")
    )
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "sojourn"),
            "run",
            str(work / "s.yaml"),
            "--out",
            str(work / "run"),
            "--no-analyze",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=seconds * 10 + 120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"sojourn run failed ({result.returncode}): {result.stderr[-2000:]}")
    table = pq.read_table(work / "run" / "traces" / "publish", columns=["intended_ns", "publish_ns"])
    rows = table.to_pydict()
    late = sorted((p - i) / 1e6 for i, p in zip(rows["intended_ns"], rows["publish_ns"]))
    span_s = (max(rows["publish_ns"]) - min(rows["publish_ns"])) / 1e9 if late else 0.0
    return {
        "rate": rate,
        "seconds": seconds,
        "planned": n,
        "published": len(late),
        "achieved_rate": round(len(late) / span_s, 1) if span_s else None,
        "p50_ms": round(_quantile(late, 0.50), 3),
        "p99_ms": round(_quantile(late, 0.99), 3),
        "p999_ms": round(_quantile(late, 0.999), 3),
        "max_ms": round(late[-1], 3),
        "late_over_1ms": round(sum(1 for x in late if x > 1.0) / len(late), 4),
    }


def machine_facts() -> dict:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_1m": load,
    }


def render(facts: dict, rows: list[dict]) -> str:
    rate, limit = TARGET
    lines = [
        f"Measured {facts['date']} on {facts['host']} ({facts['cores']} cores, Python {facts['python']}, "
        f"load average {facts['load_1m']:.1f} at the start) by `python -m benchmarks.replay`: one replaying "
        "producer in one worker process, confirms off, constant gaps. Lateness = actual - intended send "
        "time of every publish.",
        "",
        "| msg/s per worker | published / planned | achieved msg/s | p50 ms | p99 ms | p99.9 ms | max ms "
        "| share > 1 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['rate']:,} | {r['published']:,} / {r['planned']:,} | {r['achieved_rate'] or 0:,.0f} "
            f"| {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['p999_ms']:.3f} | {r['max_ms']:.1f} "
            f"| {r['late_over_1ms']:.1%} |"
        )
    hit = [r for r in rows if r["rate"] == rate]
    if hit:
        verdict = "met" if hit[0]["p99_ms"] < limit else "missed"
        lines += [
            "",
            f"Target: p99 lateness under {limit:g} ms at {rate:,} msg/s per worker — **{verdict}** "
            f"({hit[0]['p99_ms']:.3f} ms).",
        ]
    return "\n".join(lines)


def write_docs(text: str, start: str = START, end: str = END) -> None:
    doc = DOC.read_text()
    if start not in doc:
        raise SystemExit(f"{DOC}: no {start} marker to write the table under")
    head, rest = doc.split(start, 1)
    tail = rest.split(end, 1)[1]
    DOC.write_text(f"{head}{start}\n{text}\n{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="1000,2000,5000,10000", help="comma-separated msg/s per worker")
    p.add_argument("--seconds", type=float, default=10.0, help="replay length per rate (default 10)")
    p.add_argument("--confirms", action="store_true", help="publish with confirms (window 100)")
    p.add_argument("--json", metavar="PATH", help=f"write the results as JSON (default with --docs: {RESULTS})")
    p.add_argument("--docs", action="store_true", help="rewrite the table in docs/replay.md")
    p.add_argument("--bursty", action="store_true", help="a bursty file, two producers over two processes")
    args = p.parse_args(argv)
    if args.bursty:
        facts = machine_facts()
        seconds = args.seconds if args.seconds != 10.0 else 60.0
        print(f"replaying a bursty file for {seconds:g} s ...", file=sys.stderr, flush=True)
        row = measure_bursty(seconds)
        text = render_bursty(facts, row)
        print(text)
        if args.json or args.docs:
            path = Path(args.json or RESULTS)
            data = json.loads(path.read_text()) if path.is_file() else {}
            path.write_text(json.dumps({**data, "bursty": {"machine": facts, "result": row}}, indent=2) + "\n")
        if args.docs:
            write_docs(text, BURST_START, BURST_END)
        return 0
    try:
        rates = [int(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        p.error(f"--rates: expected comma-separated whole numbers, got {args.rates!r}")
    facts = machine_facts()
    rows = []
    for rate in rates:
        print(f"replaying {rate:,} msg/s for {args.seconds:g} s ...", file=sys.stderr, flush=True)
        rows.append(measure(rate, args.seconds, args.confirms))
    text = render(facts, rows)
    print(text)
    out = args.json or (str(RESULTS) if args.docs else None)
    if out:
        Path(out).write_text(json.dumps({"machine": facts, "results": rows}, indent=2) + "\n")
    if args.docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
