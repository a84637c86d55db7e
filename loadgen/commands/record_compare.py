"""`sojourn record` (the firehose into a replay file) and `sojourn compare` (analysed runs side by side)."""

from __future__ import annotations

import os

from loadgen.broker_help import broker_help
from loadgen.commands.common import (
    EXIT_BROKER,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    require_analysis,
)

__all__ = ["cmd_record", "cmd_compare"]


def cmd_record(args) -> int:
    from loadgen.commands.record import RecordError, RecordOptions, record
    from loadgen.errors import BrokerUnreachable
    from loadgen.replay.writer import TraceFileError

    duration = args.duration if args.duration is not None else (None if args.count is not None else 60.0)
    url = args.url or os.environ.get("SOJOURN_AMQP_URL") or "amqp://guest:guest@127.0.0.1:5672/"
    opts = RecordOptions(
        url=url,
        out=args.out,
        duration_s=duration,
        count=args.count,
        exchanges=tuple(args.exchanges),
        payloads=args.payloads,
        trace_on=args.trace_on,
    )
    try:
        result = record(opts)
    except (RecordError, TraceFileError) as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    except BrokerUnreachable as exc:
        raise CliError(f"{exc}\n{broker_help(exc)}", EXIT_BROKER) from None
    print(result.summary())
    if result.connection_lost:
        return EXIT_BROKER
    return EXIT_INTERRUPTED if result.interrupted else EXIT_OK


def _resolved_scenario(run_dir: str) -> dict | None:
    """run.json's resolved scenario (passwords masked when it was written); None without a run.json."""
    from loadgen.run.runinfo import read_run_json

    path = os.path.join(run_dir, "run.json")
    try:
        run = read_run_json(run_dir)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CliError(f"{path}: can not read: {exc}", EXIT_INPUT) from None
    scenario = run.get("scenario") if isinstance(run, dict) else None
    return scenario if isinstance(scenario, dict) else None


def cmd_compare(args) -> int:
    import json

    require_analysis("compare the runs on a machine that has it")
    from analysis.report.compare import render_compare
    from analysis.settings_diff import distinct_labels

    summaries, scenarios = [], []
    out_dir = os.path.dirname(os.path.abspath(args.out))
    for run_dir in args.run_dirs:
        path = os.path.join(run_dir, "summary.json")
        try:
            with open(path, encoding="utf-8") as f:
                summary = json.load(f)
        except FileNotFoundError:
            raise CliError(
                f"{run_dir}: no summary.json; analyze it first with: sojourn analyze {run_dir}", EXIT_INPUT
            ) from None
        except (OSError, ValueError) as exc:
            raise CliError(f"{path}: can not read: {exc}", EXIT_INPUT) from None
        summaries.append(summary)
        scenarios.append(_resolved_scenario(run_dir))
    names = [
        ((s.get("run") or {}).get("scenario") if isinstance(s, dict) else None) or (sc or {}).get("name")
        for s, sc in zip(summaries, scenarios)
    ]
    labels = distinct_labels(names, scenarios, args.run_dirs)
    links = {
        label: os.path.relpath(os.path.join(os.path.abspath(run_dir), "report.html"), out_dir)
        for label, run_dir in zip(labels, args.run_dirs)
    }
    html = render_compare(
        list(zip(labels, summaries)),
        links=links,
        scenarios=scenarios,
        run_dirs=[os.path.normpath(d) for d in args.run_dirs],
    )
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(html)
    print(f"comparison of {len(summaries)} runs: {args.out}")
    return EXIT_OK
