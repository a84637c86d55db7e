"""The suite file: its frozen model and loader.

Reuses the scenario loader's YAML reading (duplicate keys rejected), its checks and its
error wording, so a suite error reads `suites/nightly.yaml: scenarios[1].sloo: unknown key
(did you mean 'slo'?)`. Scenario files are resolved relative to the suite file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from analysis.slo import SloError, parse_slo
from loadgen.scenario.checks import Reader, fail, identifier, integer, number, text
from loadgen.scenario.errors import Invalid, join_path, show
from loadgen.scenario.loader import _read

__all__ = ["Suite", "SuiteEntry", "load_suite", "with_overrides", "is_suite_document", "SUITE_LAYOUT"]

SUITE_LAYOUT: dict[str, tuple[str, ...]] = {
    "suite": ("name", "description", "keep_runs", "baseline_runs", "tolerance", "slo", "scenarios"),
    "entry": ("scenario", "name", "set", "slo"),
}


@dataclass(frozen=True)
class SuiteEntry:
    name: str  # unique in the suite; names the run directory
    scenario_path: str  # resolved against the suite file's directory
    overrides: tuple[str, ...]  # `PATH=VALUE`, as `--set` takes them
    slo: tuple[str, ...]  # the suite's SLOs followed by the entry's own


@dataclass(frozen=True)
class Suite:
    source_path: str
    name: str
    keep_runs: int | None  # None keeps every run
    baseline_runs: int  # N: the baseline is the median of the last N runs
    tolerance: float  # relative: 0.2 flags a metric 20 % worse than its baseline
    entries: tuple[SuiteEntry, ...]


class _SuiteReader(Reader):
    """A `Reader` over the suite layout; `get` and `items` are shared with scenarios."""

    LAYOUT = SUITE_LAYOUT


def _slo_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Invalid(f"expected a list of expressions like 'sojourn_ms.p99 < 250', got {show(value)}")
    for i, expr in enumerate(value):
        try:
            parse_slo(expr)
        except SloError as err:
            raise Invalid(str(err), expr, f"[{i}]") from None
    return tuple(e.strip() for e in value)


def _overrides(value: Any) -> tuple[str, ...]:
    """`set:` as a mapping {path: value} (YAML values) or a list of `PATH=VALUE` strings."""
    import json

    if value is None:
        return ()
    if isinstance(value, dict):
        out = []
        for path, v in value.items():
            if not isinstance(path, str):
                raise Invalid(f"expected a field path such as consumers.main.prefetch, got {show(path)}", path)
            out.append(f"{path}={v if isinstance(v, str) else json.dumps(v)}")
        return tuple(out)
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str) or "=" not in item:
                raise Invalid(f"expected PATH=VALUE, got {show(item)}", item, f"[{i}]")
        return tuple(value)
    raise Invalid(f"expected a mapping of field paths to values, got {show(value)}")


def is_suite_document(top: Any) -> bool:
    """A parsed YAML file is a suite when it lists `scenarios:` and declares no `queue:` (a
    scenario always does): how `sojourn validate` and the example catalogue tell the two apart."""
    return isinstance(top, dict) and "scenarios" in top and "queue" not in top


def load_suite(path: str | os.PathLike) -> Suite:
    """Read and validate a suite file; raises ScenarioError. Scenario files are checked to
    exist here; their contents are validated by the caller with `load_scenario`."""
    source = os.fspath(path)
    top = _SuiteReader(source, _read(source), "", "suite")
    name = top.get("name", identifier)
    suite_slo = top.get("slo", _slo_list, ())
    base = os.path.dirname(source)
    entries, seen = [], set()
    raw_entries = top.items("scenarios")
    if not raw_entries:
        fail(source, "scenarios", top.raw.get("scenarios"), "a suite needs at least one scenario")
    for i, raw in enumerate(raw_entries):
        where = f"scenarios[{i}]"
        r = _SuiteReader(source, raw, where, "entry")
        rel = r.get("scenario", text(nonempty=True))
        scenario_path = os.path.normpath(os.path.join(base, rel))
        if not os.path.isfile(scenario_path):
            fail(source, join_path(where, "scenario"), rel, f"no such scenario file ({scenario_path})")
        default_name = os.path.splitext(os.path.basename(rel))[0]
        entry_name = r.get("name", identifier, None) or default_name
        if entry_name in seen:
            fail(
                source, join_path(where, "name"), entry_name, "two entries share this name; give one a distinct `name:`"
            )
        seen.add(entry_name)
        entries.append(
            SuiteEntry(entry_name, scenario_path, r.get("set", _overrides, ()), suite_slo + r.get("slo", _slo_list, ()))
        )
    return Suite(
        source,
        name,
        top.get("keep_runs", integer(1), None),
        top.get("baseline_runs", integer(1), 5),
        top.get("tolerance", number(0), 0.2),
        tuple(entries),
    )


def with_overrides(suite: Suite, overrides: Sequence[str]) -> Suite:
    """`suite` with `overrides` (`PATH=VALUE`, as `--set` takes them) applied to every entry after
    the entry's own, so the command line wins."""
    if not overrides:
        return suite
    return replace(suite, entries=tuple(replace(e, overrides=(*e.overrides, *overrides)) for e in suite.entries))
