"""`sojourn validate`: check a scenario file and say what it would run, without running it."""

from __future__ import annotations

import sys

from loadgen.commands.common import EXIT_INPUT, EXIT_OK, CliError, load, print_capacity, print_warnings
from loadgen.scenario.overrides import BoundedLoader

__all__ = ["cmd_validate"]


def cmd_validate(args) -> int:
    if _is_suite(args.scenario):
        return _validate_suite(args.scenario, args.overrides)
    return _validate_scenario(args.scenario, args.overrides)


def _is_suite(path: str) -> bool:
    """The file at `path` is a suite (loadgen.suite.is_suite_document)."""
    import yaml

    from loadgen.suite import is_suite_document

    try:
        with open(path, encoding="utf-8") as f:
            top = yaml.load(f, Loader=BoundedLoader)  # a SafeLoader, depth-bounded
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False  # the scenario loader says what is wrong with it
    return is_suite_document(top)


def _validate_suite(path: str, overrides: list[str]) -> int:
    """Check the suite file and every entry's scenario (with its overrides, then --set's)."""
    from loadgen.scenario import ScenarioError
    from loadgen.suite import load_suite, with_overrides

    try:
        suite = with_overrides(load_suite(path), overrides)
    except ScenarioError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    scenarios = [load(e.scenario_path, list(e.overrides)) for e in suite.entries]
    print(
        f"{path}: ok — suite {suite.name!r}, {len(suite.entries)} entries, baseline the median of the last "
        f"{suite.baseline_runs} runs, tolerance {suite.tolerance:.0%}"
    )
    for entry, s in zip(suite.entries, scenarios):
        sets = f" with {', '.join(entry.overrides)}" if entry.overrides else ""
        print(
            f"  entry {entry.name}: {entry.scenario_path}{sets}: scenario {s.name!r}, {s.run.duration_s:g} s, "
            f"{len(entry.slo)} SLOs"
        )
        print_warnings(s)
    return EXIT_OK


def _validate_scenario(path: str, overrides: list[str]) -> int:
    from loadgen.redact import mask_url
    from loadgen.replay.sources import describe, load_sources

    s = load(path, overrides)
    print_warnings(s)
    print(
        f"{s.source_path}: ok — scenario {s.name!r}, {s.run.duration_s:g} s "
        f"(warm-up {s.run.warmup_s:g} s, drain up to {s.run.drain_timeout_s:g} s), "
        f"broker {mask_url(s.broker.url)}{' (a private node sojourn run starts)' if s.broker.managed else ''}, "
        f"queue {s.queue.name!r} ({s.queue.queue_type})"
    )
    for x in s.exchanges:
        print(
            f"  exchange {x.name}: {x.type}, {'durable' if x.durable else 'not durable'}"
            f"{', deleted at the end' if x.delete_on_end else ''}"
        )
    for b in s.bindings:
        print(
            f"  binding: {b.exchange} -> queue with key {b.routing_key!r}"
            f"{f' and arguments {dict(b.arguments)}' if b.arguments else ''}"
        )
    replay = describe(s, load_sources(s))
    for g in s.producers:
        confirms = f"confirms {'window ' + str(g.confirm_window) if g.confirms else 'off'}"
        if g.replay is None:
            print(f"  producer {g.name}: {g.count} x {g.rate_text()} msg/s {g.arrival}, {g.size_bytes} B, {confirms}")
            continue
        r = replay[g.name]
        print(
            f"  producer {g.name}: {g.count} x replaying {r['source']} ({r['format']}, {r['rows']:,} rows over "
            f"{r['span_s']:g} s) at speed {r['speed']:g}: {r['expected']:,} publishes in the run, {confirms}"
        )
        if r["ignored_columns"]:
            print(f"  warning: {r['source']}: ignored columns {', '.join(r['ignored_columns'])}", file=sys.stderr)
    for g in s.consumers:
        print(
            f"  consumer {g.name}: {g.count} x prefetch {g.prefetch} ({g.prefetch_scope}), "
            f"{g.ack_mode} ack, "
            + (
                f"handler {g.handler.path} ({g.handler.mode}"
                + (f", {g.handler.threads} threads" if g.handler.mode == "thread" else "")
                + f", on error {g.handler.on_error})"
                if g.handler
                else f"processing mean {g.processing.mean_ms:g} ms ({g.processing.distribution})"
            )
            + (
                f", egress {', '.join(name for name, _ in g.egress.classes)} at most "
                f"{g.egress.max_depth_units:,} units each (min burst {g.egress.min_burst})"
                if g.egress
                else ""
            )
            + (
                f", outcomes: requeue {g.outcomes.requeue:.0%}, discard {g.outcomes.discard:.0%}, "
                f"reject {g.outcomes.reject:.0%}"
                if g.outcomes
                else ""
            )
            + (f", reads the stream from {g.offset if g.offset is not None else 'next'}" if s.queue.stream else "")
        )
    if s.network is not None:
        print(
            f"  network (delay-line proxy): {_link_text('up', s.network.upstream)}, "
            f"{_link_text('down', s.network.downstream)}{', DOWN' if s.network.down else ''}"
        )
    for name, start, end in s.phase_windows():
        print(f"  phase {name}: {start:g}–{end:g} s")
    for slo in s.slo:
        print(f"  slo: {slo}")
    print_capacity(s)
    return EXIT_OK


def _link_text(direction: str, link) -> str:
    text = f"{direction} {link.latency_ms:g} ms"
    if link.jitter_ms:
        text += f" + 0–{link.jitter_ms:g} ms jitter"
    if link.bandwidth_bytes_per_s:
        text += f" at most {link.bandwidth_bytes_per_s:g} B/s"
    return text
