"""`python -m benchmarks analysis`: `sojourn analyze` against DuckDB and pandas on the same traces.

For each size (a recorded quickstart run, then synthetic runs of 100k, 1M and 10M messages; 30M
with --large) every round runs, one after the other, each as a fresh process as a user would:
`sojourn analyze RUN_DIR` on the warm local Spark server (analysis.server: the benchmark's own,
in --work, up and warmed, with one untimed analysis of the run before the first round, as
`farm-bench --warmup` does), `sojourn analyze --no-server RUN_DIR` (a Spark of the command's own,
its start included), the DuckDB baseline and the pandas baseline
(benchmarks/analysis_baselines.py: the publish-delivery join, sojourn and end-to-end percentiles
overall, per consumer and per second, counts, acked-or-not accounting). On the quickstart-size run
the first analysis with no server up (the server's start included) is timed once per round before
the rounds, each time from a stopped server. Wall time and the peak memory of each command's whole
process tree are measured, and the server JVM's peak resident memory; the ratios are taken within
each round; the growth exponent of the warm server's time against size is fitted from 1M messages up. The synthetic runs
are generated once into --work (not timed) and reused.

    python -m benchmarks analysis                          # quickstart, 100k, 1M, 10M; 3 rounds
    python -m benchmarks analysis --sizes 100k,1M --rounds 1
    python -m benchmarks analysis --large                  # adds 30M messages
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.netem import _repo, machine_facts
from loadgen.broker.local import free_loopback_port

__all__ = ["main", "measure", "growth_exponent", "tree_rss_bytes", "accounting_matches", "ENGINES"]

SIZES = {"quickstart": 0, "100k": 100_000, "1M": 1_000_000, "10M": 10_000_000}
LARGE = {"30M": 30_000_000}
RECORDED = Path(__file__).resolve().parents[1] / "tests" / "data" / "runs" / "quickstart"
ENGINES = ("sojourn", "in_process", "duckdb", "pandas")
"""`sojourn`: on the warm server; `in_process`: `--no-server`."""
SAMPLE_S = 0.1
TIMEOUT_S = 3600


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc (0 once it is gone)."""
    total, stack, seen = 0, [pid], set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(cmd: list[str], env: dict | None = None) -> dict:
    """Run `cmd` to its end: wall seconds, peak resident memory of its process tree (sampled every
    0.1 s), exit status and the tail of its output."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=_repo())
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(SAMPLE_S):
            peak[0] = max(peak[0], tree_rss_bytes(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        done.set()
        sampler.join()
    return {
        "wall_s": round(time.perf_counter() - started, 3),
        "peak_mb": round(peak[0] / 1e6, 1),
        "exit": proc.returncode,
        "tail": out[-2000:],
    }


def growth_exponent(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(time) against log(size): 1.0 is linear growth."""
    pts = [(math.log(n), math.log(t)) for n, t in points if n > 0 and t > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return round(sum((x - mx) * (y - my) for x, y in pts) / sxx, 3) if sxx else None


def _run_dir(name: str, work: Path) -> tuple[Path, int, dict]:
    """The run directory for a size (generated once), its message count and the expected accounting."""
    if name == "quickstart":  # a copy: the analysis writes its summary and report into the run directory
        out = work / "recorded-quickstart"
        if not (out / "run.json").is_file():
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(RECORDED, out)
        expected = json.loads((out / "summary.before.json").read_text())["messages"]
        return out, expected["published"], expected
    from benchmarks.synth import SIZES as SYNTH_SIZES, generate

    messages = {**SIZES, **LARGE}[name]
    out = work / f"synth-{name}"
    if not (out / "synth.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        print(f"analysis: generating {name} messages into {out}", flush=True)
        generate(out, messages, large=messages > max(SYNTH_SIZES.values(), default=0) or name in LARGE)
    expected = json.loads((out / "synth.json").read_text())["expected"]["messages"]
    return out, messages, expected


def _commands(run_dir: Path) -> dict[str, list[str]]:
    py = sys.executable
    # `sojourn analyze` as the console script runs it, from this checkout (the commands run in its
    # root): a benchmark of a worktree measures that worktree's code, not the installed one.
    return {
        "sojourn": [py, "-m", "loadgen.cli", "analyze", str(run_dir)],
        "in_process": [py, "-m", "loadgen.cli", "analyze", "--no-server", str(run_dir)],
        "duckdb": [py, "-m", "benchmarks.analysis_baselines", "duckdb", str(run_dir)],
        "pandas": [py, "-m", "benchmarks.analysis_baselines", "pandas", str(run_dir)],
    }


def _check(run_dir: Path, expected: dict) -> bool:
    """The analysis found exactly the accounting the generator wrote (or the recorded run had)."""
    got = json.loads((run_dir / "summary.json").read_text())["messages"]
    return all(
        accounting_matches(got[k], expected[k])
        for k in ("published", "acked", "discarded", "left_in_broker", "unaccounted", "redelivered", "duplicates")
    )


def accounting_matches(got, expected) -> bool:
    """A count equal to the expected one; of a dict of counts (the discard classes), every expected
    class equal and any class added since (an additive change, docs/summary.md) zero: a recorded
    run's summary predates the classes added after it."""
    if not isinstance(expected, dict):
        return got == expected
    return all(got.get(k) == v for k, v in expected.items()) and not any(v for k, v in got.items() if k not in expected)


def _server_peak_mb(directory: Path) -> float | None:
    """The server JVM's peak resident memory so far (VmHWM), or None when none is up."""
    from analysis import server

    info = server.status(directory)
    try:
        with open(f"/proc/{info.jvm_pid if info else 0}/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return None
    return round(kib * 1024 / 1e6, 1)


def run(sizes: list[str], rounds: int, work: Path, engines: tuple[str, ...] = ENGINES) -> dict:
    """Measure every size; the result row the report renders. The server is the benchmark's own (in
    `work`, on a free port), stopped at the end."""
    from analysis import server

    spark_dir = work / "spark"
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}  # the job's own JVM settings
    env.update(SOJOURN_SPARK_DIR=str(spark_dir), SOJOURN_SPARK_PORT=str(free_loopback_port()))
    try:
        return _run(sizes, rounds, work, engines, env, spark_dir)
    finally:
        server.stop(spark_dir)


def _run(sizes: list[str], rounds: int, work: Path, engines: tuple[str, ...], env: dict, spark_dir: Path) -> dict:
    from analysis import server

    rows = []
    server_peak: float | None = None
    for name in sizes:
        run_dir, messages, expected = _run_dir(name, work)
        bytes_ = sum(p.stat().st_size for p in (run_dir / "traces").rglob("*.parquet"))
        trials: dict[str, list[dict]] = {e: [] for e in (*engines, "first")}
        ratios: dict[str, list[float]] = {e: [] for e in engines if e != "sojourn"}
        loads = []
        if name == "quickstart" and "sojourn" in engines:  # the first analysis: no server up, each time
            for i in range(rounds):
                server.stop(spark_dir)
                first = measure(_commands(run_dir)["sojourn"], env)
                trials["first"].append(first)
                print(f"analysis {name} round {i + 1}: first (server start included) {first['wall_s']} s", flush=True)
            server.stop(spark_dir)  # the warm rows' server is one `up` starts and warms, not the first's
        if "sojourn" in engines:  # not timed: the server up and warmed, then one analysis of this run
            if server.status(spark_dir) is None:
                subprocess.run(
                    [sys.executable, "-m", "loadgen.cli", "spark", "up"],
                    env=env,
                    cwd=_repo(),
                    check=True,
                    capture_output=True,
                )
            measure(_commands(run_dir)["sojourn"], env)
        for i in range(rounds):
            loads.append(os.getloadavg()[0])
            got = {}
            order = engines[i % len(engines) :] + engines[: i % len(engines)]  # rotate who goes first
            for engine in order:
                got[engine] = measure(_commands(run_dir)[engine], env)
                trials[engine].append(got[engine])
                print(
                    f"analysis {name} round {i + 1}: {engine} {got[engine]['wall_s']} s, "
                    f"{got[engine]['peak_mb']} MB, exit {got[engine]['exit']}",
                    flush=True,
                )
                if engine == "sojourn":
                    server_peak = max(server_peak or 0.0, _server_peak_mb(spark_dir) or 0.0) or None
            for engine in ratios:
                if got["sojourn"]["exit"] == 0 and got[engine]["exit"] == 0:
                    ratios[engine].append(got["sojourn"]["wall_s"] / got[engine]["wall_s"])
        ok = all(t["exit"] == 0 for t in trials["sojourn"]) and _check(run_dir, expected)
        row = {
            "size": name,
            "messages": messages,
            "parquet_mb": round(bytes_ / 1e6, 1),
            "rounds": rounds,
            "load_1m": [round(x, 2) for x in loads],
            "accounting_ok": ok,
            "failures": [t["tail"] for t in trials["sojourn"] if t["exit"] != 0][:1],
            "server_peak_mb": server_peak,  # so far: the server lives through the sizes
        }
        for engine, ts in trials.items():
            if not ts:
                continue
            walls = sorted(t["wall_s"] for t in ts if t["exit"] == 0)
            row[engine] = {
                "median_s": round(statistics.median(walls), 2) if walls else None,
                "min_s": walls[0] if walls else None,
                "max_s": walls[-1] if walls else None,
                "peak_mb": max((t["peak_mb"] for t in ts), default=None),
                "failed": sum(t["exit"] != 0 for t in ts),
            }
        for engine, rs in ratios.items():
            row[f"vs_{engine}"] = round(statistics.median(rs), 2) if rs else None
        rows.append(row)
    points = [
        (r["messages"], r["sojourn"]["median_s"])
        for r in rows
        if r["messages"] >= 1_000_000 and r["sojourn"]["median_s"]
    ]
    return {"name": "analysis", "rows": rows, "growth_exponent_from_1M": growth_exponent(points)}


def render(result: dict) -> list[str]:
    """The report's section for the analysis row."""
    lines = [
        "",
        f"### The analysis: `sojourn analyze` against DuckDB and pandas{_when(result)}",
        "",
        "Each command a fresh process, as a user runs it, alternated in each round: `sojourn analyze` on the "
        "warm local Spark server (*warm*: the server up and warmed, and one untimed analysis of the run, "
        "before the first round), `sojourn analyze --no-server` (*in-process*: a Spark of the command's own, "
        "its start included), DuckDB and pandas; on the quickstart-size run `sojourn analyze` with no server "
        "up is timed once per round before the rounds (*first*: the server's start included). Medians of the "
        "rounds, with the fastest and slowest in brackets; *peak MB*: the command's whole process tree; "
        "*server MB*: the server JVM's peak resident memory so far; the ratios are taken within each round "
        "(`benchmarks/analysis.py`). The synthetic runs "
        "come from `benchmarks/synth.py`; *accounting* says whether the analysis found exactly the published, "
        "acked, discarded and left messages the generator wrote.",
        "",
        "| run | messages | Parquet MB | rounds | load avg (1 min) | warm s | peak MB | first s | in-process s "
        "| server MB | DuckDB s | pandas s | warm / DuckDB | warm / in-process | accounting |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def t(cell: dict | None) -> str:
        if cell is None:
            return "—"
        if cell.get("median_s") is None:
            return f"failed ({cell.get('failed')})"
        return f"{cell['median_s']} [{cell['min_s']}-{cell['max_s']}]"

    for r in result["rows"]:
        loads = r["load_1m"]
        lines.append(
            f"| {r['size']} | {r['messages']:,} | {r['parquet_mb']} | {r['rounds']} "
            f"| {min(loads):.1f}-{max(loads):.1f} | {t(r['sojourn'])} | {r['sojourn']['peak_mb']} "
            f"| {t(r.get('first'))} | {t(r.get('in_process'))} | {r.get('server_peak_mb')} "
            f"| {t(r['duckdb'])} | {t(r['pandas'])} "
            f"| {r['vs_duckdb']} | {r.get('vs_in_process')} | {'exact' if r['accounting_ok'] else '**WRONG**'} |"
        )
    lines += [
        "",
        f"Growth of `sojourn analyze`'s time on the warm server with size from 1M messages up: exponent "
        f"{result.get('growth_exponent_from_1M')} (1.0 is linear).",
    ]
    return lines


def _when(r: dict) -> str:
    return f" (measured {r['measured']})" if r.get("measured") else ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks analysis", description=__doc__.split("\n")[0])
    p.add_argument(
        "--sizes",
        default=",".join(SIZES),
        metavar="NAME,...",
        help=f"which runs: {', '.join([*SIZES, *LARGE])} (default: {','.join(SIZES)})",
    )
    p.add_argument("--large", action="store_true", help="add the 30M-message run")
    p.add_argument("--rounds", type=int, default=3, help="rounds per size (default 3)")
    p.add_argument(
        "--work",
        type=Path,
        default=Path(_repo(), ".sojourn", "bench-runs"),
        help="where the synthetic runs are generated and kept (default .sojourn/bench-runs)",
    )
    p.add_argument("--json", type=Path, default=Path(_repo(), "benchmarks", "results.json"))
    p.add_argument("--docs", type=Path, default=Path(_repo(), "docs", "benchmarks.md"))
    p.add_argument("--no-docs", action="store_true")
    args = p.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()] + (list(LARGE) if args.large else [])
    unknown = [s for s in sizes if s not in {**SIZES, **LARGE}]
    if unknown:
        p.error(f"--sizes: unknown {', '.join(unknown)}; known: {', '.join([*SIZES, *LARGE])}")
    if args.rounds < 1:
        p.error("--rounds: at least 1")
    result = run(sizes, args.rounds, args.work)
    result["measured"] = time.strftime("%Y-%m-%d", time.gmtime())
    from benchmarks.__main__ import merge_and_write

    merge_and_write(args.json, None if args.no_docs else args.docs, [result], machine_facts())
    for line in render(result):
        print(line)
    return 0
