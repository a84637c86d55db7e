"""`sojourn broker up|down|status`: the command line over ManagedBroker (loadgen.cli wires it in).

Exit status: up 0 (started, or already running), 2 (not installed, port taken, bad setting, the
node failed to start), 130 interrupted (the half-started node is stopped); status 0 running,
1 not running; down 0 (stopped, or was not running), 2 (could not purge).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loadgen.broker.config import (
    MIB,
    BrokerSettingsError,
    check_against_host,
    effective_settings,
    parse_setting,
    settings_warnings,
    watermark_settings,
)
from loadgen.broker.managed import (
    DEFAULT_PORT,
    STATE_FILE,
    BrokerError,
    BrokerStatus,
    ManagedBroker,
    default_dir,
)
from loadgen.redact import mask_url

__all__ = ["add_parser", "cmd_broker"]

EXIT_OK, EXIT_NOT_RUNNING, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_parser(sub) -> None:
    brk = sub.add_parser(
        "broker",
        help="start, stop or inspect a private throwaway RabbitMQ node (e.g. a low memory watermark)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A second RabbitMQ node run from the installed rabbitmq-server, with its own name\n"
        "(sojourn-PORT@localhost), port (loopback only), data directory and rabbitmq.conf,\n"
        "for settings one must not set on a shared broker, such as a memory watermark low\n"
        "enough to trigger producer flow control. See docs/broker.md.",
        epilog="example:\n"
        "  sojourn broker up --memory-watermark-mb 200\n"
        "  sojourn run scenarios/quickstart.yaml --set broker.url=amqp://guest:guest@127.0.0.1:5673/\n"
        "  sojourn broker down --purge",
    )
    actions = brk.add_subparsers(dest="broker_command", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up",
        help="write the config and start the node; print its URL",
        description="Start the node detached and wait until it answers AMQP; print "
        "its URL on stdout. Already running from DIR: say so, exit 0.",
    )
    _add_where(up)
    mem = up.add_mutually_exclusive_group()
    mem.add_argument(
        "--memory-watermark",
        type=float,
        metavar="FRACTION",
        help="vm_memory_high_watermark.relative: publishers block above this fraction of RAM "
        "(default 0.4; 0 blocks them at once)",
    )
    mem.add_argument(
        "--memory-watermark-mb",
        type=float,
        metavar="MIB",
        help="vm_memory_high_watermark.absolute in MiB; below the node's own use at boot "
        "(~100-140 MiB) publishers are blocked from the start",
    )
    up.add_argument(
        "--setting",
        action="append",
        default=[],
        dest="settings",
        metavar="KEY=VALUE",
        help="any other rabbitmq.conf line, e.g. disk_free_limit.absolute=1GB (repeatable)",
    )
    up.add_argument(
        "--management-port",
        type=int,
        metavar="PORT",
        help="also run the management plugin, its HTTP API and UI on 127.0.0.1:PORT (guest/guest): "
        "the broker's own counters, e.g. to check the traces against them",
    )
    up.add_argument(
        "--timeout",
        type=float,
        default=90.0,
        metavar="S",
        help="give up (and stop the node) if it does not answer AMQP within S seconds (default 90)",
    )

    status = actions.add_parser(
        "status",
        help="is it running; pid, watermark, memory use and alarms",
        description="Exit 0 when the node is running, 1 when it is not.",
    )
    _add_where(status)

    down = actions.add_parser(
        "down",
        help="stop the node (rabbitmqctl stop); --purge deletes its directory",
        description="Stop the node and wait for it to exit. Exit 0 also when it was not running.",
    )
    _add_where(down)
    down.add_argument("--purge", action="store_true", help="then delete DIR (data, logs, config)")


def _add_where(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--port",
        type=int,
        metavar="PORT",
        help=f"AMQP port on 127.0.0.1 (default {DEFAULT_PORT}, or the port last used in --dir)",
    )
    p.add_argument("--dir", metavar="DIR", help="the node's directory (default .sojourn/broker/sojourn-PORT/)")


def cmd_broker(args) -> int:
    try:
        return {"up": _up, "status": _status, "down": _down}[args.broker_command](args)
    except (BrokerError, BrokerSettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT


def _say(message: str) -> None:
    print(f"sojourn broker: {message}", file=sys.stderr, flush=True)


def _existing(args) -> ManagedBroker:
    """The broker named by --dir/--port as it was last started (its port from the state file)."""
    directory = Path(args.dir) if args.dir else default_dir(args.port or DEFAULT_PORT)
    if (directory / STATE_FILE).is_file():
        broker = ManagedBroker.from_dir(directory)
        if args.port is not None and args.port != broker.port:
            _say(f"{directory} holds the broker for port {broker.port}, not {args.port}: using {broker.port}")
        return broker
    return ManagedBroker(directory, args.port or DEFAULT_PORT)


def _up(args) -> int:
    settings = watermark_settings(args.memory_watermark, args.memory_watermark_mb)
    for text in args.settings:
        key, value = parse_setting(text)
        settings[key] = value
    existing = _existing(args)
    if existing.is_running():
        _say(
            f"{existing.node} is already running from {existing.dir} (pid {existing.pid()}, "
            f"watermark {existing.watermark})"
        )
        wanted = ManagedBroker(existing.dir, args.port or existing.port, settings)
        if (args.port is not None and wanted.port != existing.port) or (
            settings and wanted.settings != existing.settings
        ):
            _say(
                "the port or settings asked for differ from the running node's and were not applied: "
                f"`sojourn broker down --dir {existing.dir}` first"
            )
        print(existing.url)
        return EXIT_OK
    broker = ManagedBroker(existing.dir, args.port or existing.port, settings, args.management_port)
    # as for a scenario's private node (loadgen.scenario.broker): a disk limit its disk can never meet
    # is refused, settings RabbitMQ accepts but that block every publisher are said
    effective = effective_settings(dict(settings))
    check_against_host(effective, broker.dir)
    for warning in settings_warnings(effective, broker.dir):
        _say(f"warning: {warning}")
    try:
        result = broker.start(timeout=args.timeout, progress=_say)
    except KeyboardInterrupt:
        _say("interrupted: the node was stopped")
        return EXIT_INTERRUPTED
    _say(
        f"{broker.node} answers on {mask_url(broker.url)} after {result.seconds:.1f} s "
        f"(pid {result.pid}; data and logs in {broker.dir})"
    )
    if broker.management_url is not None:
        _say(f"management API and UI: {broker.management_url} (guest/guest)")
    _say(f"stop it with: sojourn broker down --dir {broker.dir} [--purge]")
    print(broker.url)
    return EXIT_OK


def _status(args) -> int:
    broker = _existing(args)
    status = broker.status()
    print(format_status(status, broker.url))
    return EXIT_OK if status.running else EXIT_NOT_RUNNING


def format_status(status: BrokerStatus, url: str) -> str:
    if not status.running:
        return f"{status.node}: not running (directory {status.dir})"
    lines = [
        f"{status.node}: running (pid {status.pid})",
        f"  url:       {mask_url(url)}",
        f"  directory: {status.dir}",
        f"  watermark: {status.watermark}",
    ]
    if status.memory_limit_bytes is not None and status.memory_used_bytes is not None:
        lines.append(
            f"  memory:    {status.memory_used_bytes / MIB:,.1f} MiB used of a "
            f"{status.memory_limit_bytes / MIB:,.1f} MiB limit"
        )
    if status.alarms is not None:
        lines.append(
            "  alarms:    " + (", ".join(status.alarms) + " (publishers are blocked)" if status.alarms else "none")
        )
    if status.detail:
        lines.append(f"  note:      {status.detail}")
    return "\n".join(lines)


def _down(args) -> int:
    broker = _existing(args)
    was_running = broker.stop(purge=False)
    _say(f"{broker.node} stopped" if was_running else f"{broker.node} was not running")
    if args.purge:
        existed = broker.dir.exists()
        broker.purge()
        if existed:
            _say(f"deleted {broker.dir}")
    return EXIT_OK
