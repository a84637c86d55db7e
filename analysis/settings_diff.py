"""The settings that tell runs apart: each run's resolved scenario (run.json's `scenario`) flattened
to dotted paths spelled as `--set` takes them (`consumers.main.prefetch`), the paths whose values
differ between runs, and labels that tell apart runs of one scenario. Pure; compare.html uses it.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from analysis.redact import mask_urls

__all__ = ["Missing", "SettingDiff", "flatten_settings", "differing_settings", "format_setting", "distinct_labels"]

Scenario = Mapping[str, Any]  # run.json's `scenario`: the resolved scenario, passwords masked


class Missing(enum.Enum):
    NOT_SET = "–"  # this run's scenario has no such path (another code version, a group only others have)
    UNKNOWN = "?"  # this run has no resolved scenario (no run.json): nothing is known


class SettingDiff(NamedTuple):
    path: str  # `consumers.main.prefetch`
    values: tuple[Any, ...]  # one per run, in the runs' order; a `Missing` where there is no value


def _named(items: Sequence[Any]) -> bool:
    """A list of groups addressed by name, as `--set consumers.main.prefetch=5` addresses them."""
    names = [item.get("name") for item in items if isinstance(item, Mapping)]
    return (
        bool(items)
        and len(names) == len(items)
        and all(isinstance(n, str) for n in names)
        and len(set(names)) == len(names)
    )


def _flatten(node: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            _flatten(value, f"{path}.{key}" if path else str(key), out)
    elif isinstance(node, list) and _named(node):
        for item in node:
            _flatten(item, f"{path}.{item['name']}", out)
    elif isinstance(node, list) and node and all(isinstance(item, Mapping) for item in node):
        for i, item in enumerate(node):
            _flatten(item, f"{path}[{i}]", out)
    else:
        out[path] = node  # a value, or a list of values compared whole


def flatten_settings(scenario: Scenario) -> dict[str, Any]:
    """`{"consumers.main.prefetch": 20, ...}`, in the scenario's own order. Named lists (producers,
    consumers, timeline phases) are keyed by name, other lists of mappings by index (`bindings[0]`)."""
    out: dict[str, Any] = {}
    if isinstance(scenario, Mapping):
        for key, value in scenario.items():
            _flatten(value, str(key), out)
    return out


def differing_settings(scenarios: Sequence[Scenario | None]) -> list[SettingDiff]:
    """The paths whose values are not the same in every run that has a scenario (`None`: no
    run.json; its cells are `Missing.UNKNOWN`). Paths in the order they first appear."""
    flat = [None if s is None else flatten_settings(s) for s in scenarios]
    known = [f for f in flat if f is not None]
    paths: dict[str, None] = {}
    for f in known:
        paths.update(dict.fromkeys(f))
    diffs = []
    for path in paths:
        seen = [f.get(path, Missing.NOT_SET) for f in known]
        if all(_same(v, seen[0]) for v in seen[1:]):
            continue
        values = tuple(Missing.UNKNOWN if f is None else f.get(path, Missing.NOT_SET) for f in flat)
        diffs.append(SettingDiff(path, values))
    return diffs


def _same(a: Any, b: Any) -> bool:
    """Equal as settings: 40 and 40.0 are one duration, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def format_setting(value: Any) -> str:
    """As a scenario file spells it: `20`, `0.25`, `poisson`, `null`, `true`, `[1, 2]`; `–` for a
    path the run does not have, `?` for a run with no known settings. URL passwords are masked."""
    if isinstance(value, Missing):
        return value.value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "), default=str)
    return mask_urls(text)  # run.json is written masked; a hand-edited or older one reaches chart legends too


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def distinct_labels(
    names: Sequence[str | None], scenarios: Sequence[Scenario | None], run_dirs: Sequence[str], *, most: int = 2
) -> list[str]:
    """One label per run: its scenario name; where names repeat, the name plus the settings that
    differ within that group (`quickstart (consumers.main.prefetch=10)`, up to `most` of them);
    where that still repeats (identical settings, no run.json), plus its run directory's name, then
    its whole path."""
    bases = [name or os.path.basename(os.path.normpath(d)) for name, d in zip(names, run_dirs)]
    labels = list(bases)
    for name in dict.fromkeys(bases):
        group = [i for i, base in enumerate(bases) if base == name]
        if len(group) < 2:
            continue
        diffs = differing_settings([scenarios[i] for i in group])
        for pos, i in enumerate(group):
            shown = [
                f"{d.path}={_short(format_setting(d.values[pos]))}"
                for d in diffs
                if d.values[pos] is not Missing.UNKNOWN
            ]
            if shown:
                more = ", …" if len(shown) > most else ""
                labels[i] = f"{name} ({', '.join(shown[:most])}{more})"
    repeated = {label for label in labels if labels.count(label) > 1}
    dirs = [os.path.normpath(d) for d in run_dirs]
    by_name = [f"{label} · {os.path.basename(d)}" if label in repeated else label for label, d in zip(labels, dirs)]
    return [f"{label} · {d}" if by_name.count(named) > 1 else named for label, named, d in zip(labels, by_name, dirs)]
