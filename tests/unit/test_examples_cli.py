"""`sojourn scenarios list|copy` and `sojourn locustfile`, run as a user runs them, from a clone.

Expected names, descriptions and file contents come from the repository's scenarios/ directly
(a glob and PyYAML), not from loadgen.examples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
REPO_FILES = sorted(
    p.relative_to(SCENARIOS).as_posix()
    for p in SCENARIOS.rglob("*")
    if p.is_file() and "__pycache__" not in p.parts  # the example handler's bytecode, when imported
)
YAML_FILES = [f for f in REPO_FILES if f.endswith(".yaml")]


def _sojourn(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_the_repository_ships_a_replay_trace_and_a_suite():
    # what the tests below rely on: not only top-level scenarios
    assert "traces/burst-sample.csv" in REPO_FILES
    assert "suites/nightly.yaml" in REPO_FILES


def test_list_names_every_scenario_and_suite_with_its_own_description(tmp_path: Path):
    result = _sojourn("scenarios", "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for rel in YAML_FILES:
        name = Path(rel).stem
        description = " ".join(yaml.safe_load((SCENARIOS / rel).read_text())["description"].split())
        line = next((line for line in lines if line.startswith(f"  {name} ")), None)
        assert line is not None, f"{name} not listed:\n{result.stdout}"
        assert description in line


def test_list_names_every_file_a_copy_brings_along(tmp_path: Path):
    out = _sojourn("scenarios", "list", cwd=tmp_path).stdout
    for rel in REPO_FILES:
        assert (Path(rel).stem if "/" not in rel else rel) in out, f"{rel} not in:\n{out}"


def test_in_a_clone_the_examples_are_the_repository_s_scenarios_directory(tmp_path: Path):
    assert f"({SCENARIOS})" in _sojourn("scenarios", "list", cwd=tmp_path).stdout.splitlines()[0]


def test_bare_scenarios_lists_them(tmp_path: Path):
    assert _sojourn("scenarios", cwd=tmp_path).stdout == _sojourn("scenarios", "list", cwd=tmp_path).stdout


def test_copy_writes_a_byte_identical_scenario_into_the_working_directory(tmp_path: Path):
    result = _sojourn("scenarios", "copy", "quickstart", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _files_under(tmp_path) == ["quickstart.yaml"]
    assert (tmp_path / "quickstart.yaml").read_bytes() == (SCENARIOS / "quickstart.yaml").read_bytes()


def test_copy_takes_the_file_name_too_and_makes_the_directory(tmp_path: Path):
    result = _sojourn("scenarios", "copy", "slow-processing.yaml", "a/b", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    copied = tmp_path / "a/b/slow-processing.yaml"
    assert copied.read_bytes() == (SCENARIOS / "slow-processing.yaml").read_bytes()


def test_copy_brings_the_replay_file_at_its_relative_path_and_the_copy_validates(tmp_path: Path):
    replay_rel = yaml.safe_load((SCENARIOS / "replay-burst.yaml").read_text())["producers"][0]["replay"]["path"]
    result = _sojourn("scenarios", "copy", "replay-burst", "mine", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    dest = tmp_path / "mine"
    assert _files_under(dest) == sorted(["replay-burst.yaml", replay_rel])
    assert (dest / replay_rel).read_bytes() == (SCENARIOS / replay_rel).read_bytes()
    assert (dest / "replay-burst.yaml").read_bytes() == (SCENARIOS / "replay-burst.yaml").read_bytes()
    check = _sojourn("validate", "mine/replay-burst.yaml", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert str(dest / replay_rel) in check.stdout  # replays the copy's trace, not the repository's


def test_copy_of_the_suite_brings_its_scenarios_and_the_copy_validates(tmp_path: Path):
    suite = yaml.safe_load((SCENARIOS / "suites/nightly.yaml").read_text())
    needed = {os.path.normpath(os.path.join("suites", e["scenario"])) for e in suite["scenarios"]}
    result = _sojourn("scenarios", "copy", "nightly", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _files_under(tmp_path) == sorted({"suites/nightly.yaml", *needed})
    check = _sojourn("validate", "suites/nightly.yaml", cwd=tmp_path)
    assert check.returncode == 0, check.stderr


def test_copy_of_scheduling_brings_the_crontab_the_systemd_units_and_the_ci_workflow(tmp_path: Path):
    expected = sorted(p.relative_to(SCENARIOS).as_posix() for p in (SCENARIOS / "scheduling").rglob("*") if p.is_file())
    assert {"scheduling/crontab", "scheduling/ci/nightly.yml", "scheduling/systemd/sojourn-nightly.timer"} <= set(
        expected
    )
    result = _sojourn("scenarios", "copy", "scheduling", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _files_under(tmp_path / "out") == expected
    for rel in expected:
        assert (tmp_path / "out" / rel).read_bytes() == (SCENARIOS / rel).read_bytes(), rel
    listed = _sojourn("scenarios", "list", cwd=tmp_path).stdout
    assert "Scheduling:" in listed and "scheduling/crontab" in listed


def test_copy_all_copies_every_file_of_the_scenarios_directory_byte_for_byte(tmp_path: Path):
    result = _sojourn("scenarios", "copy", "--all", "all", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _files_under(tmp_path / "all") == REPO_FILES
    for rel in REPO_FILES:
        assert (tmp_path / "all" / rel).read_bytes() == (SCENARIOS / rel).read_bytes(), rel


def test_copy_refuses_to_overwrite_and_names_the_file(tmp_path: Path):
    (tmp_path / "quickstart.yaml").write_text("mine\n")
    result = _sojourn("scenarios", "copy", "quickstart", cwd=tmp_path)
    assert result.returncode == 2
    assert "quickstart.yaml" in result.stderr and "--force" in result.stderr
    assert (tmp_path / "quickstart.yaml").read_text() == "mine\n"


def test_copy_writes_nothing_when_one_of_its_files_exists(tmp_path: Path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces/burst-sample.csv").write_text("mine\n")
    result = _sojourn("scenarios", "copy", "replay-burst", cwd=tmp_path)
    assert result.returncode == 2
    assert "traces/burst-sample.csv" in result.stderr
    assert not (tmp_path / "replay-burst.yaml").exists()
    assert (tmp_path / "traces/burst-sample.csv").read_text() == "mine\n"


def test_copy_force_overwrites(tmp_path: Path):
    (tmp_path / "quickstart.yaml").write_text("mine\n")
    result = _sojourn("scenarios", "copy", "quickstart", "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "quickstart.yaml").read_bytes() == (SCENARIOS / "quickstart.yaml").read_bytes()


def test_unknown_name_is_exit_2_naming_it_and_every_known_name(tmp_path: Path):
    result = _sojourn("scenarios", "copy", "quickstrat", cwd=tmp_path)
    assert result.returncode == 2
    assert "'quickstrat'" in result.stderr
    assert "did you mean 'quickstart'?" in result.stderr
    for rel in YAML_FILES:
        assert Path(rel).stem in result.stderr
    assert _files_under(tmp_path) == []


def test_copy_without_a_name_or_all_is_exit_2(tmp_path: Path):
    result = _sojourn("scenarios", "copy", cwd=tmp_path)
    assert result.returncode == 2
    assert "--all" in result.stderr


def test_locustfile_prints_the_path_of_an_existing_locustfile(tmp_path: Path):
    result = _sojourn("locustfile", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert result.stdout.count("\n") == 1
    assert path.is_absolute() and path.is_file() and path.name == "locustfile.py"
    assert path.samefile(REPO / "loadgen/locustfile.py")  # in a clone: the clone's
