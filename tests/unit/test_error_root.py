"""One exception root for the load generator: every error class a loadgen module defines for its
callers derives from loadgen.errors.LoadgenError (so a caller can catch the load generator's own
failures apart from Python's), keeping its older base too (a ScenarioError is still caught as
such, a ReplayFileError still as a ValueError)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Raised and caught inside one module, never seen by a caller.
_INTERNAL = {"Invalid", "PathError", "_Bad"}


_WALK = """
import importlib, inspect, json, pkgutil, sys
import loadgen
from loadgen.errors import LoadgenError
internal = set(sys.argv[1].split(","))
found, outside = [], []
for info in pkgutil.walk_packages(loadgen.__path__, "loadgen."):
    if info.name.endswith(("locustfile", "__main__")):
        continue  # the locustfile reads the command line when imported; __main__s run
    module = importlib.import_module(info.name)
    for name, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ == info.name and issubclass(cls, Exception) and name not in internal:
            found.append(f"{info.name}.{name}")
            if not issubclass(cls, LoadgenError):
                outside.append(f"{info.name}.{name}")
print(json.dumps({"found": found, "outside": outside}))
"""


def _walk() -> dict:
    """Every error class loadgen's modules define, and those outside the root: in a fresh
    interpreter, since importing every module imports Locust, which monkey-patches the process
    for gevent (in this one, beside the suite's Spark threads, that hung the run)."""
    done = subprocess.run(
        [sys.executable, "-c", _WALK, ",".join(sorted(_INTERNAL))],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_error_the_load_generator_defines_derives_from_its_root():
    walked = _walk()
    assert "loadgen.scenario.errors.ScenarioError" in walked["found"]
    assert "loadgen.commands.common.CliError" in walked["found"]
    assert walked["outside"] == []


def test_the_older_bases_are_kept():
    from loadgen.netem.process import NetemError
    from loadgen.replay.source import ReplayFileError
    from loadgen.replay.writer import TraceFileError

    assert issubclass(ReplayFileError, ValueError) and issubclass(TraceFileError, ValueError)
    assert issubclass(NetemError, RuntimeError)
