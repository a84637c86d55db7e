"""sojourn as a pip user has it: the wheel installed with its dependencies (no `analysis` extra) into a
fresh virtualenv and used from a directory outside the repository with no PYTHONPATH: the shipped
scenarios copied out, validated and run, and the installed locustfile run by `locust -f`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import REPO
from tests.integration.traces import read_rows

pytestmark = pytest.mark.integration

# What the wheel is built from: pyproject.toml's packages, its readme, and the build hook's scenarios/.
# Built from a copy so that a stale build/ in the clone can not leak into the wheel.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "loadgen", "analysis", "scenarios")
REPO_SCENARIOS = sorted(
    p.relative_to(REPO / "scenarios").as_posix() for p in (REPO / "scenarios").rglob("*") if p.is_file()
)
# quickstart, shortened: 5 s of load, no warm-up, no busy phase; its own queue, deleted at the end
SHORT = (
    "run.duration_s=5",
    "run.warmup_s=0",
    "run.drain_timeout_s=15",
    "timeline=[]",
    "queue.name=sojourn.it.installed",
    "queue.delete_on_end=true",
)


def _check(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)
    assert result.returncode == 0, (
        f"{cmd} exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    )
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the virtualenv it is installed in)."""
    root = tmp_path_factory.mktemp("installed")
    src = root / "src"
    src.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, src / name)
    _check([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(src)])
    (wheel,) = (root / "dist").glob("sojourn-*.whl")
    venv = root / "venv"
    _check([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    # this environment's pip installs into the new one: the wheel and its dependencies, no extra
    _check([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q", str(wheel)])
    return wheel, venv


@dataclass
class User:
    """Runs a command line as a user of the virtualenv does, in `work`, a directory outside the repository."""

    venv: Path
    work: Path

    def __call__(self, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYSPARK_SUBMIT_ARGS")}
        env.update(VIRTUAL_ENV=str(self.venv), PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
        return _check(["bash", "-c", command], cwd=self.work, env=env, timeout=timeout)


@pytest.fixture
def user(installed, tmp_path) -> User:
    (tmp_path / "work").mkdir()
    return User(installed[1], tmp_path / "work")


def test_the_wheel_carries_every_file_of_the_scenarios_directory(installed):
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as z:
        for rel in REPO_SCENARIOS:
            assert z.read(f"loadgen/example_scenarios/{rel}") == (REPO / "scenarios" / rel).read_bytes(), rel


def test_the_commands_and_their_files_are_the_virtualenv_s(installed, user):
    _, venv = installed
    assert user("command -v sojourn").stdout.strip() == str(venv / "bin/sojourn")
    assert user("command -v locust").stdout.strip() == str(venv / "bin/locust")
    site = Path(user("python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'").stdout.strip())
    assert site.is_relative_to(venv)
    modules = user("python -c 'import loadgen, analysis; print(loadgen.__file__); print(analysis.__file__)'")
    for path in modules.stdout.split():
        assert Path(path).is_relative_to(site), path
    locustfile = Path(user("sojourn locustfile").stdout.strip())
    assert locustfile == site / "loadgen/locustfile.py" and locustfile.is_file()
    assert f"({site / 'loadgen/example_scenarios'})" in user("sojourn scenarios list").stdout
    no_spark = subprocess.run([venv / "bin/python", "-c", "import pyspark"], capture_output=True)
    assert no_spark.returncode != 0  # installed without the analysis extra


def test_copy_all_gives_the_repository_s_files(user):
    user("sojourn scenarios copy --all examples")
    copied = user.work / "examples"
    assert sorted(p.relative_to(copied).as_posix() for p in copied.rglob("*") if p.is_file()) == REPO_SCENARIOS
    for rel in REPO_SCENARIOS:
        assert (copied / rel).read_bytes() == (REPO / "scenarios" / rel).read_bytes(), rel
    user("sojourn validate examples/replay-burst.yaml && sojourn validate examples/suites/nightly.yaml")
    user("sojourn scenarios copy scheduling")  # the crontab, systemd units and CI workflow, out of the wheel
    for rel in ("scheduling/crontab", "scheduling/systemd/sojourn-nightly.service", "scheduling/ci/nightly.yml"):
        assert (user.work / rel).read_bytes() == (REPO / "scenarios" / rel).read_bytes(), rel


def test_copy_validate_and_run_quickstart(user):
    user("sojourn scenarios copy quickstart")
    assert (user.work / "quickstart.yaml").read_bytes() == (REPO / "scenarios/quickstart.yaml").read_bytes()
    sets = " ".join(f"--set '{s}'" for s in SHORT)
    user(f"sojourn validate quickstart.yaml {sets}")
    user(f"sojourn run quickstart.yaml --no-analyze {sets} --out runs/q", timeout=150)
    run_dir = user.work / "runs/q"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    publishes = read_rows(run_dir, "publish")
    acked = {d["message_id"] for d in read_rows(run_dir, "delivery") if d["outcome"] == "ack"}
    assert publishes and acked == {p["message_id"] for p in publishes}  # ~150 msg/s for 5 s, every one acked


def test_locust_runs_the_installed_locustfile(user):
    user("sojourn scenarios copy quickstart")
    sets = " ".join(f"--set '{s}'" for s in SHORT)
    user(
        f'locust -f "$(sojourn locustfile)" --scenario quickstart.yaml --headless --only-summary {sets} --run-dir lr',
        timeout=150,
    )
    run_dir = user.work / "lr"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert read_rows(run_dir, "publish") and read_rows(run_dir, "delivery")
