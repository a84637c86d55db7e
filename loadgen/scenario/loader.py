"""Read a scenario YAML file, apply `--set` overrides and the environment, validate, build the model;
or read the resolved scenario a run recorded in its run.json (`load_resolved`), checked the same way.

Every problem raises ScenarioError naming the file, the YAML path, the bad value and a close
match; nothing here prints or exits. The schema is documented in docs/scenarios.md.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import yaml

from loadgen.scenario import arrivals
from loadgen.scenario.broker import DEFAULT_URL, read_broker
from loadgen.scenario.buffers import resolved_egress
from loadgen.scenario.checks import (
    MAX_SIZE_BYTES,
    SHORT_STRING_BYTES,
    Check,
    Reader,
    fail as _fail,
    number as _number,
)
from loadgen.scenario.errors import (
    Invalid,
    ScenarioError,
    did_you_mean,
    join_path as _join,
    located,
    show,
)
from loadgen.scenario.fields import declared, plain_dict
from loadgen.scenario.handler import handler
from loadgen.scenario.limits import over_limits
from loadgen.scenario.model import (
    BASE_PHASE,
    PHASE_SETTABLE,
    YAML_LAYOUT,
    ConsumerGroup,
    GroupKind,
    Phase,
    ProducerGroup,
    RunSpec,
    Scenario,
)
from loadgen.scenario.names import capture_queue_name, slot_queue_name
from loadgen.scenario.overrides import (
    BoundedLoader,
    PathError,
    apply_overrides,
    blame_override,
    parse_group_path,
    resolve_group,
    tokens,
)
from loadgen.scenario.sections import network_phase_check, read_network
from loadgen.scenario.streams import check_stream_consumers, stream_group_refusal
from loadgen.scenario.topology import read_bindings, read_exchanges, read_queue

__all__ = ["load_scenario", "load_resolved", "from_resolved", "ENV_URL", "DEFAULT_URL", "MAX_SIZE_BYTES"]

ENV_URL = "SOJOURN_AMQP_URL"
_PHASE_SET_ROOTS = ("producers", "consumers", "network")


def load_scenario(
    path: str | os.PathLike[str], overrides: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> Scenario:
    """Load and validate a scenario. Broker URL precedence: `--set broker.url` >
    `$SOJOURN_AMQP_URL` (when non-empty) > the file's `broker.url` > the default."""
    source = os.fspath(path)
    env = os.environ if env is None else env
    overrides = (overrides,) if isinstance(overrides, str) else tuple(overrides or ())
    tree, origins = apply_overrides(_read(source), overrides, source)
    env_url = env.get(ENV_URL) or ""
    broker = tree.get("broker")
    url_set = "broker.url" in origins or ("broker" in origins and isinstance(broker, dict) and "url" in broker)
    managed = isinstance(broker, dict) and broker.get("managed") not in (None, False)
    use_env = bool(env_url) and not url_set and not managed and (broker is None or isinstance(broker, dict))
    if use_env:
        tree["broker"] = {**(broker or {}), "url": env_url}
    url_is_default = not (url_set or use_env or (isinstance(broker, dict) and "url" in broker))
    try:
        return _build(tree, source, overrides, url_is_default)
    except ScenarioError as err:  # point it at the --set or variable that put the bad value there
        err = blame_override(err, origins)
        if use_env and err.override is None and err.yaml_path == "broker.url":
            err = ScenarioError(err.path, err.yaml_path, err.value, f"{err.message} (from ${ENV_URL})")
        raise err from None


def load_resolved(run_json: str | os.PathLike[str], url: str | None = None) -> Scenario:
    """The resolved scenario a run recorded in RUN_DIR/run.json (its `scenario`, Scenario.to_dict's
    output), checked as a scenario file is; an error names run.json and the field (`scenario.<path>`).
    Its source_path and overrides are run.json's `scenario_path` and `overrides` (as recorded: a
    password masked). run.json masks the broker's password too: `url` is the URL to use instead."""
    source = os.fspath(run_json)
    try:
        with open(source, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ScenarioError(source, "", None, "no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ScenarioError(source, "", None, f"can not read the file: {reason}") from None
    except json.JSONDecodeError as err:
        raise ScenarioError(
            source, "", None, f"line {err.lineno}, column {err.colno}: invalid JSON: {err.msg}"
        ) from None
    if not isinstance(data, dict):
        raise ScenarioError(source, "", data, f"expected a mapping at the top level, got {show(data)}")
    overrides = data.get("overrides") or []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ScenarioError(
            source, "overrides", overrides, f"expected a list of PATH=VALUE texts, got {show(overrides)}"
        )
    scenario = from_resolved(data.get("scenario"), source, url)
    return replace(scenario, source_path=str(data.get("scenario_path") or source), overrides=tuple(overrides))


def from_resolved(tree: Any, source: str, url: str | None = None) -> Scenario:
    """A Scenario from a resolved scenario (Scenario.to_dict's output, as in run.json's `scenario`),
    checked as a scenario file is, with what a resolved scenario gives besides: a replay group's
    rate, arrival, size_bytes, bursts and priority as resolved (0 and the defaults), and a managed
    node's URL. Errors name `source` and `scenario.<path>`. `url`, when given, replaces broker.url
    (the resolved scenario's password may be masked). No environment variable applies."""
    if not isinstance(tree, dict):
        raise ScenarioError(source, "scenario", tree, f"expected the resolved scenario (a mapping), got {show(tree)}")
    tree = copy.deepcopy(tree)
    if url is not None and isinstance(tree.get("broker"), dict):
        tree["broker"]["url"] = url
    try:
        return _build(tree, source, (), resolved=True)
    except ScenarioError as err:
        raise ScenarioError(err.path, _join("scenario", err.yaml_path), err.value, err.message) from None


def _read(source: str) -> dict[str, Any]:
    try:
        with open(source, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ScenarioError(source, "", None, "no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ScenarioError(source, "", None, f"can not read the file: {reason}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(filter(None, [err.context, err.problem]))
        raise ScenarioError(source, "", None, f"{where}invalid YAML: {problem}") from None
    except yaml.YAMLError as err:
        raise ScenarioError(source, "", None, f"invalid YAML: {err}") from None
    if data is None:
        raise ScenarioError(source, "", None, "the file is empty; a scenario needs at least name, queue and run")
    if not isinstance(data, dict):
        raise ScenarioError(source, "", data, f"expected a mapping at the top level, got {show(data)}")
    return data


class _StrictLoader(BoundedLoader):
    """BoundedLoader that also rejects duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # unhashable keys are left to SafeLoader to reject
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# ---- sections


def _replay_duration(source: str, producers: tuple[ProducerGroup, ...]) -> float | None:
    """The run's duration when run.duration_s is left out: long enough for every replay group's
    window to be published once at its speed (the last row's time / speed, in whole seconds, plus
    one), so `speed: 2` halves the run. None without a replay group, or when one loops (it has no
    end of its own): then run.duration_s is required."""
    ends = []
    for i, group in enumerate(producers):
        spec = group.replay
        if spec is None:
            continue
        if spec.loop is not False:
            return None
        start, end = spec.window
        if end is None:
            from loadgen.replay.source import ReplayFileError
            from loadgen.replay.sources import trace_of

            try:
                offsets = trace_of(spec.path).offset_s
            except (ReplayFileError, OSError) as err:
                _fail(source, f"producers[{i}].replay.path", spec.path, str(err))
            end = offsets[-1] if offsets else 0.0
        ends.append(math.floor(max(0.0, end - start) / spec.speed) + 1.0)
    return max(ends) if ends else None


class _Reader(Reader):
    """A reader of scenario files: their sections' keys are YAML_LAYOUT's."""

    LAYOUT = YAML_LAYOUT


def _build(
    tree: dict[str, Any], source: str, overrides: tuple[str, ...], url_is_default: bool = False, resolved: bool = False
) -> Scenario:
    """`resolved`: `tree` is a resolved scenario (from_resolved), not a scenario file's."""
    top = _Reader(source, tree, "", "scenario")
    name = top.field(Scenario, "name")
    description = top.field(Scenario, "description")
    broker = read_broker(top, url_is_default, resolved)
    queue = read_queue(top)
    exchanges = read_exchanges(top)
    bindings = read_bindings(top, exchanges)
    producers = tuple(_groups(top, "producers", "producer", ProducerGroup, queue.name, resolved))
    given = top.raw.get("run")
    replay_s = None if isinstance(given, dict) and "duration_s" in given else _replay_duration(source, producers)
    r = top.section("run", "run", required=replay_s is None)
    duration = r.field(RunSpec, "duration_s", *(() if replay_s is None else (replay_s,)))
    warmup = r.field(RunSpec, "warmup_s")
    if warmup >= duration:
        _fail(
            source,
            "run.warmup_s",
            warmup,
            f"expected a number >= 0 and < run.duration_s ({duration:g}), got {warmup:g}",
        )
    run = RunSpec(**r.fields(RunSpec, duration_s=duration, warmup_s=warmup))
    consumers = tuple(_groups(top, "consumers", "consumer", ConsumerGroup, queue.name, resolved))
    network = read_network(top)
    timeline = _timeline(top, run, producers, consumers, network is not None, queue.stream)
    _crash_needs_manual_ack(source, consumers)
    slo = top.field(Scenario, "slo")
    # Every declared field is read above, in the order the dependencies set; top.fields would read a
    # leaf left out here as declared (and asserts that no section, which has no check, is left out).
    read = top.fields(
        Scenario,
        name=name,
        description=description,
        broker=broker,
        queue=queue,
        run=run,
        producers=producers,
        consumers=consumers,
        timeline=timeline,
        slo=slo,
        network=network,
        exchanges=exchanges,
        bindings=bindings,
    )
    scenario = Scenario(source_path=source, overrides=overrides, **read)
    check_stream_consumers(source, queue.stream, consumers)
    _derived_names_fit(source, scenario)
    if not run.beyond_limits:
        for path, value, reason in over_limits(scenario):
            _fail(source, path, value, reason)
    return scenario


def _derived_names_fit(source: str, scenario: Scenario) -> None:
    """The names sojourn makes from the scenario's (scenario.names) are AMQP short strings too."""
    queue = scenario.queue.name
    capture = capture_queue_name(queue)
    if len(capture.encode("utf-8")) > SHORT_STRING_BYTES:
        _fail(
            source,
            "queue.name",
            queue,
            f"too long for the dead-letter capture queue sojourn names after it ({capture!r}: "
            f"{len(capture.encode('utf-8')):,} bytes, AMQP allows {SHORT_STRING_BYTES})",
        )
    kinds: tuple[tuple[GroupKind, Sequence[ProducerGroup | ConsumerGroup]], ...] = (
        ("producers", scenario.producers),
        ("consumers", scenario.consumers),
    )
    for kind, groups in kinds:
        for i, group in enumerate(groups):
            slot = slot_queue_name(queue, kind, group.name, max(0, scenario.max_count(kind, group.name) - 1))
            if len(slot.encode("utf-8")) > SHORT_STRING_BYTES:
                _fail(
                    source,
                    f"{kind}[{i}].name",
                    group.name,
                    f"with queue.name {queue!r}, too long for the slot queues sojourn declares per user "
                    f"({len(slot.encode('utf-8')):,} bytes, AMQP allows {SHORT_STRING_BYTES}): shorten one of them",
                )


def _crash_needs_manual_ack(source: str, consumers: Sequence[ConsumerGroup]) -> None:
    """`leave: crash` requeues the unacked deliveries; with auto-ack there are none, the buffer
    would simply be lost, and the accounting has no class for that: refuse it up front. Outcome
    rates settle deliveries by nack or reject, which auto-ack has no room for."""
    for i, group in enumerate(consumers):
        if group.leave == "crash" and group.ack_mode == "auto":
            _fail(source, f"consumers[{i}].leave", "crash", _CRASH_NEEDS_MANUAL)
        if group.outcomes is not None and group.ack_mode == "auto":
            _fail(source, f"consumers[{i}].outcomes", plain_dict(group.outcomes), _OUTCOMES_NEED_MANUAL)
        if group.handler is not None:
            _handler_alone(source, i, group)


def _handler_alone(source: str, i: int, group: ConsumerGroup) -> None:
    """A handler settles each delivery by its return value, in its own time: with auto-ack there is
    nothing to settle, and simulated processing, outcome rates, CoDel or egress beside it would
    each decide something the handler decides."""
    where = f"consumers[{i}]"
    if group.ack_mode == "auto":
        _fail(
            source,
            f"{where}.ack_mode",
            "auto",
            "a handler needs ack_mode: manual (its return value acks, nacks or rejects)",
        )
    clashes = {
        "processing_ms": group.processing.mean_ms > 0,
        "outcomes": group.outcomes is not None,
        "codel": group.codel is not None,
        "egress": group.egress is not None,
    }
    for key, clash in clashes.items():
        if clash:
            _fail(
                source,
                f"{where}.{key}",
                None,
                f"consumer group {group.name!r} has a handler: its wall time is the processing and its return "
                f"value the outcome, so {key} can not be set beside it",
            )


_OUTCOMES_NEED_MANUAL = (
    "outcome rates need ack_mode: manual (with auto-ack the broker forgets a delivery once it is "
    "sent: there is nothing left to nack or reject)"
)

_CRASH_NEEDS_MANUAL = (
    "a crash needs ack_mode: manual (with auto-ack the broker forgets a delivery once "
    "it is sent, so a crash would lose the buffer instead of requeueing it)"
)


def _groups(top: Reader, key: str, section: str, make: type[Any], queue_name: str, resolved: bool = False) -> list[Any]:
    """The `key` list of groups, each read into `make` field by field as its declaration says."""
    groups: list[Any] = []
    seen: dict[str, int] = {}
    scenario_dir = os.path.dirname(os.path.abspath(top.source))
    checks: dict[str, Check] = {"replay": arrivals.replay(scenario_dir), "handler": handler(scenario_dir)}
    if resolved:
        checks["egress"] = resolved_egress
    for i, raw in enumerate(top.items(key)):
        reader = top.at(raw, f"{key}[{i}]", section)
        values: dict[str, Any] = {}
        for attr, spec in declared(make):
            values[attr] = reader.get(spec.key, checks.get(spec.key) or spec.check or checks[spec.key], spec.default)
            if attr == "name":  # the first field: a duplicate is reported before the others are read
                name = values["name"]
                if name in seen:
                    also = f"duplicate name: {key}[{seen[name]}] is also called {name!r}"
                    _fail(top.source, f"{key}[{i}].name", name, also)
                seen[name] = i
        if "routing_key" in values and values["routing_key"] is None:
            values["routing_key"] = queue_name
        if key == "producers":
            _producer_source(reader, values, resolved)
        groups.append(make(**values))
    return groups


def _producer_source(reader: Reader, values: dict[str, Any], resolved: bool = False) -> None:
    """A producer has a rate (generated arrivals) or a replay file, not both. A resolved replay group
    (`resolved`) gives the fields its file decides too, as resolved: rate 0 and the others' defaults."""
    if values["replay"] is None:
        if values["rate"] is None:
            reader.get("rate", _number(0))  # raises: missing required key
        return
    as_resolved = {**_REPLAY_DEFAULTS, "rate": 0.0} if resolved else {}
    for field in arrivals.REPLAY_ONLY_FIELDS:
        if field in reader.raw and not (field in as_resolved and values[field] == as_resolved[field]):
            _fail(
                reader.source,
                _join(reader.yaml_path, field),
                reader.raw[field],
                f"a replay group takes {field} from its file (remove it, or remove replay)",
            )
    values["rate"] = 0.0


_REPLAY_DEFAULTS = {spec.key: spec.default for _, spec in declared(ProducerGroup)}


def _timeline(
    top: Reader,
    run: RunSpec,
    producers: Sequence[ProducerGroup],
    consumers: Sequence[ConsumerGroup],
    has_network: bool,
    stream: bool = False,
) -> tuple[Phase, ...]:
    source, duration = top.source, run.duration_s
    entries: list[Any] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(top.items("timeline")):
        reader = top.at(raw, f"timeline[{i}]", "phase")
        name = reader.field(Phase, "name")
        if name == BASE_PHASE:
            _fail(source, f"timeline[{i}].name", name, "'base' is reserved for the time outside every phase")
        if name in seen:
            _fail(
                source, f"timeline[{i}].name", name, f"duplicate name: timeline[{seen[name]}] is also called {name!r}"
            )
        seen[name] = i
        start = reader.field(Phase, "start_s")
        if start >= duration:
            _fail(
                source,
                f"timeline[{i}].start_s",
                start,
                f"expected a number >= 0 and < run.duration_s ({duration:g}), got {start:g}",
            )
        end = reader.field(Phase, "end_s")  # None: the next phase's start, else the run's end
        if end is not None and not start < end <= duration:
            _fail(
                source,
                f"timeline[{i}].end_s",
                end,
                f"expected a number > start_s ({start:g}) and <= run.duration_s ({duration:g}), got {end:g}",
            )
        settings = _phase_set(reader, f"timeline[{i}].set", producers, consumers, has_network, stream)
        entries.append((start, i, name, end, settings))
    entries.sort(key=lambda entry: (entry[0], entry[1]))
    phases = []
    for k, (start, i, name, end, settings) in enumerate(entries):
        following = entries[k + 1] if k + 1 < len(entries) else None
        if following and (following[0] == start or (end is not None and end > following[0])):
            other_end = f"{end:g}" if end is not None else "?"
            _fail(
                source,
                f"timeline[{following[1]}].start_s",
                following[0],
                f"phase {following[2]!r} (starting at {following[0]:g}) overlaps phase {name!r} "
                f"(timeline[{i}], {start:g}-{other_end} s)",
            )
        resolved_end = end if end is not None else (following[0] if following else duration)
        phases.append(Phase(name, start, resolved_end, settings))
    return tuple(phases)


def _phase_set(
    reader: Reader,
    yaml_path: str,
    producers: Sequence[ProducerGroup],
    consumers: Sequence[ConsumerGroup],
    has_network: bool,
    stream: bool = False,
) -> tuple[tuple[str, Any], ...]:
    source, raw = reader.source, reader.raw.get("set")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        _fail(source, yaml_path, raw, f"expected a mapping of path to value, got {show(raw)}")
    out: dict[str, Any] = {}
    written: dict[str, str] = {}
    for key, value in raw.items():
        key_path = _join(yaml_path, key)
        if _first_key(key) == "network":
            out[str(key)] = _network_phase_value(source, key_path, str(key), value, has_network)
            continue  # network paths have one spelling each: no duplicates to look for
        if _first_key(key) not in _PHASE_SET_ROOTS:
            _fail(
                source,
                key_path,
                value,
                "expected producers.<group>.<field>, consumers.<group>.<field> "
                f"or network.<field>{did_you_mean(_first_key(key), _PHASE_SET_ROOTS)}",
            )
        try:
            kind, ref, field = parse_group_path(str(key))
            groups = producers if kind == "producers" else consumers
            group = groups[resolve_group(ref, [g.name for g in groups], kind)]
        except (PathError, ValueError) as err:
            _fail(source, key_path, value, str(err))
        settable = PHASE_SETTABLE[kind]
        if field not in settable:
            every = YAML_LAYOUT[kind[:-1]]
            reason = "can not be changed by a phase" if field in every else "unknown key" + did_you_mean(field, every)
            _fail(source, key_path, value, f"{reason} (a phase may set {kind}.<group>.{{{', '.join(settable)}}})")
        if isinstance(group, ProducerGroup) and group.replay is not None:
            _fail(
                source,
                key_path,
                value,
                f"producer group {group.name!r} replays a file: a phase can not "
                "change its count, rate, size or arrival (the file sets them)",
            )
        canonical = f"{kind}.{group.name}.{field}"
        if canonical in out:
            _fail(source, key_path, value, f"sets the same field as {written[canonical]!r}")
        declaration = {spec.key: spec for _, spec in declared(type(group))}
        check = declaration[field].check
        assert check is not None  # a phase sets no field without a check of its own (not replay)
        out[canonical] = located(source, key_path, value, check)
        if (
            field == "leave"
            and out[canonical] == "crash"
            and isinstance(group, ConsumerGroup)
            and group.ack_mode == "auto"
        ):
            _fail(source, key_path, value, f"consumer group {group.name!r} has ack_mode: auto; {_CRASH_NEEDS_MANUAL}")
        if (
            field == "outcomes"
            and out[canonical] is not None
            and isinstance(group, ConsumerGroup)
            and group.ack_mode == "auto"
        ):
            _fail(source, key_path, value, f"consumer group {group.name!r} has ack_mode: auto; {_OUTCOMES_NEED_MANUAL}")
        if stream and isinstance(group, ConsumerGroup):
            refusal = stream_group_refusal(field, out[canonical])
            if refusal:
                _fail(source, key_path, value, f"consumer group {group.name!r} reads a stream: {refusal}")
        written[canonical] = str(key)
    return tuple(sorted(out.items()))


def _first_key(key: Any) -> str:
    try:
        return str(tokens(str(key))[0])
    except (PathError, IndexError):
        return ""


def _network_phase_value(source: str, key_path: str, key: str, value: Any, has_network: bool) -> Any:
    """A phase's `network.<path>` value, checked like the base field; `key` is canonical as written."""
    try:
        check = network_phase_check(key.removeprefix("network."))  # `network[0].down` stays unknown
    except Invalid as bad:
        _fail(source, key_path, value, bad.message)
    if not has_network:
        _fail(
            source,
            key_path,
            value,
            "the scenario has no network section (add 'network:' to put the delay-line proxy in the path)",
        )
    return located(source, key_path, value, check)
