"""Suite files: what loads, and errors that name the file, the YAML path and the close match."""

from __future__ import annotations

import pathlib

import pytest

from loadgen.cli import main
from loadgen.scenario import ScenarioError
from loadgen.suite import load_suite

SCENARIO = (
    "name: t\nqueue: {name: q}\nrun: {duration_s: 4}\nproducers:\n  - name: p\n    rate: 10\nconsumers:\n  - name: c\n"
)


def write(tmp_path: pathlib.Path, suite: str) -> pathlib.Path:
    (tmp_path / "t.yaml").write_text(SCENARIO)
    path = tmp_path / "suite.yaml"
    path.write_text(suite)
    return path


def test_a_suite_resolves_scenarios_next_to_it_and_prepends_the_suite_slos(tmp_path):
    path = write(
        tmp_path,
        "name: n\ntolerance: 0.1\nslo: ['messages.unaccounted == 0']\n"
        "scenarios:\n  - scenario: t.yaml\n    set: {consumers.c.prefetch: 5}\n"
        "    slo: ['sojourn_ms.p99 < 250']\n",
    )
    suite = load_suite(path)
    (entry,) = suite.entries
    assert entry.name == "t"
    assert entry.scenario_path == str(tmp_path / "t.yaml")
    assert entry.overrides == ("consumers.c.prefetch=5",)
    assert entry.slo == ("messages.unaccounted == 0", "sojourn_ms.p99 < 250")
    assert (suite.tolerance, suite.baseline_runs, suite.keep_runs) == (0.1, 5, None)


def test_an_unknown_key_names_the_yaml_path_and_the_close_match(tmp_path):
    path = write(tmp_path, "name: n\nscenarios:\n  - scenario: t.yaml\n    sloo: []\n")
    with pytest.raises(ScenarioError) as info:
        load_suite(path)
    assert str(info.value) == f"{path}: scenarios[0].sloo: unknown key (did you mean 'slo'?)"


def test_a_bad_slo_names_its_index(tmp_path):
    path = write(
        tmp_path, "name: n\nscenarios:\n  - scenario: t.yaml\n    slo: ['sojourn_ms.p99 < 1', 'p99 about 3']\n"
    )
    with pytest.raises(ScenarioError) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}: scenarios[0].slo[1]: 'p99 about 3' is not of the form")


def test_two_entries_with_one_name_are_refused(tmp_path):
    path = write(tmp_path, "name: n\nscenarios:\n  - scenario: t.yaml\n  - scenario: t.yaml\n")
    with pytest.raises(ScenarioError) as info:
        load_suite(path)
    assert "scenarios[1].name: two entries share this name" in str(info.value)


def test_a_missing_scenario_file_is_an_error_at_its_entry(tmp_path):
    path = write(tmp_path, "name: n\nscenarios:\n  - scenario: nope.yaml\n")
    with pytest.raises(ScenarioError) as info:
        load_suite(path)
    assert f"{path}: scenarios[0].scenario: no such scenario file" in str(info.value)


def test_nightly_exits_2_naming_the_file_and_path_of_a_suite_error(tmp_path, capsys):
    path = write(tmp_path, "name: n\nkeep_run: 3\nscenarios:\n  - scenario: t.yaml\n")
    assert main(["nightly", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: keep_run: unknown key (did you mean 'keep_runs'?)" in err
    assert not (tmp_path / "out").exists()  # nothing ran


def test_nightly_exits_2_when_a_scenario_override_is_bad(tmp_path, capsys):
    path = write(tmp_path, "name: n\nscenarios:\n  - scenario: t.yaml\n    set: {consumers.c.prefech: 5}\n")
    assert main(["nightly", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "prefech" in capsys.readouterr().err


def test_the_repository_nightly_suite_loads():
    suite = load_suite(pathlib.Path(__file__).parents[2] / "scenarios/suites/nightly.yaml")
    assert [e.name for e in suite.entries] == ["quickstart", "quickstart-prefetch-1", "codel-slow-consumer"]
