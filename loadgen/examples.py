"""The example scenarios sojourn ships: where they are, what each one is, and which files it needs beside it.

A wheel carries the repository's scenarios/ as the package data loadgen/example_scenarios/ (setup.py);
in a clone, and in an editable install, they are the clone's scenarios/. Paths inside the examples
directory are POSIX and relative to it ("quickstart.yaml", "suites/nightly.yaml"), and so are a copy's.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from loadgen.errors import LoadgenError

__all__ = ["Example", "ExamplesError", "SCHEDULING", "examples_dir", "catalogue", "find", "files_for"]

PACKAGED = "example_scenarios"  # loadgen/example_scenarios/ in an installed wheel


class ExamplesError(LoadgenError):
    """The examples are missing, one of them does not load, or a name matches none of them."""


@dataclass(frozen=True)
class Example:
    name: str  # what `sojourn scenarios copy` takes: the file's name without .yaml
    path: str  # relative to the examples directory, e.g. "suites/nightly.yaml"
    kind: str  # "scenario", "suite" or "scheduling"
    description: str  # the file's own `description:`, on one line
    needs: tuple[str, ...]  # the files it refers to (a suite's scenarios, replay files, handlers), relative paths


def examples_dir() -> Path:
    """The installed package's example_scenarios/, else the clone's scenarios/ beside loadgen/."""
    packaged = resources.files("loadgen") / PACKAGED
    if packaged.is_dir():
        return Path(str(packaged))  # a wheel installs into a directory: the traversable is a path
    clone = Path(__file__).resolve().parents[1] / "scenarios"
    if clone.is_dir():
        return clone
    raise ExamplesError(
        f"no example scenarios: neither {packaged} (an installed wheel) nor {clone} (a clone) exists; "
        "reinstall sojourn (pip install --force-reinstall sojourn)"
    )


SCHEDULING = "scheduling"
"""The examples directory's folder of ways to run the nightly suite every night (a crontab line, a
systemd service and timer, a CI workflow): one example of its own kind, copied whole."""


def catalogue(root: Path | None = None) -> list[Example]:
    """Every scenario and suite under `root` (default examples_dir()), then the scheduling examples:
    scenarios first, each kind by name."""
    root = examples_dir() if root is None else root
    scheduling = root / SCHEDULING
    found = [_example(root, p) for p in sorted(root.rglob("*.yaml")) if not p.is_relative_to(scheduling)]
    if scheduling.is_dir():
        files = sorted(p.relative_to(root).as_posix() for p in scheduling.rglob("*") if p.is_file())
        what = "ways to run the nightly suite every night: a crontab line, a systemd service and timer, a CI workflow"
        found.append(Example(SCHEDULING, files[0], SCHEDULING, what, tuple(files[1:])))
    names: dict[str, str] = {}
    for e in found:
        if e.name in names:
            raise ExamplesError(f"{root}: {names[e.name]} and {e.path} have the same name {e.name!r}")
        names[e.name] = e.path
    order = {"scenario": 0, "suite": 1, SCHEDULING: 2}
    return sorted(found, key=lambda e: (order[e.kind], e.name))


def find(examples: list[Example], name: str) -> Example:
    """The example called `name` ("quickstart", "quickstart.yaml" or its path, "suites/nightly.yaml")."""
    for e in examples:
        if name in (e.name, e.path, Path(e.path).name):
            return e
    known = [e.name for e in examples]
    close = difflib.get_close_matches(name.removesuffix(".yaml"), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ExamplesError(f"no example scenario {name!r}{hint}; the examples are: {', '.join(known)}")


def files_for(example: Example) -> list[str]:
    """The example's file and every file it needs, in that order: what a copy of it takes."""
    return [example.path, *example.needs]


def _example(root: Path, path: Path) -> Example:
    import yaml

    from loadgen.scenario import ScenarioError
    from loadgen.scenario.overrides import BoundedLoader

    rel = path.relative_to(root).as_posix()
    try:
        top = yaml.load(path.read_text(encoding="utf-8"), Loader=BoundedLoader)  # a SafeLoader, depth-bounded
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ExamplesError(f"{path}: can not read the example: {exc}") from None
    from loadgen.suite import is_suite_document

    kind = "suite" if is_suite_document(top) else "scenario"  # as `sojourn validate` tells
    top = top if isinstance(top, dict) else {}
    try:
        needed = _suite_needs(path) if kind == "suite" else _scenario_needs(str(path), ())
    except ScenarioError as exc:
        raise ExamplesError(f"an example does not load: {exc}") from None
    needs: list[str] = []
    for file in needed:
        resolved = Path(file).resolve()
        if not resolved.is_relative_to(root.resolve()):
            raise ExamplesError(f"{path}: refers to {file}, outside {root}: a copy could not keep the path")
        if (r := resolved.relative_to(root.resolve()).as_posix()) not in needs:
            needs.append(r)
    return Example(path.stem, rel, kind, " ".join(str(top.get("description") or "").split()), tuple(needs))


def _scenario_needs(path: str, overrides: tuple[str, ...]) -> list[str]:
    from loadgen.scenario import load_scenario

    scenario = load_scenario(path, overrides, env={})  # the file as shipped: no $SOJOURN_AMQP_URL
    replays = [g.replay.path for g in scenario.producers if g.replay is not None]
    return replays + [f for g in scenario.consumers if g.handler is not None for f in _handler_files(g.handler.path)]


def _handler_files(path: str) -> list[str]:
    """The files of a handler's module and of the packages above it (their __init__.py), which the
    loader has just imported: what a copy of its scenario must bring along."""
    import sys

    parts = path.partition(":")[0].split(".")
    files = []
    for i in range(1, len(parts) + 1):
        module = sys.modules.get(".".join(parts[:i]))
        file = getattr(module, "__file__", None)
        if file:
            files.append(file)
    return files


def _suite_needs(path: Path) -> list[str]:
    from loadgen.suite import load_suite

    needs: list[str] = []
    for entry in load_suite(str(path)).entries:
        needs += [entry.scenario_path, *_scenario_needs(entry.scenario_path, entry.overrides)]
    return needs
