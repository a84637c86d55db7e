"""One exception root for the load generator: every error class a loadgen module defines for its
callers derives from loadgen.errors.LoadgenError (so a caller can catch the load generator's own
failures apart from Python's), keeping its older base too (a ScenarioError is still caught as
such, a ReplayFileError still as a ValueError)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import loadgen
from loadgen.errors import LoadgenError

# Raised and caught inside one module, never seen by a caller.
_INTERNAL = {"Invalid", "PathError", "_Bad"}


def _public_error_classes():
    for info in pkgutil.walk_packages(loadgen.__path__, "loadgen."):
        if info.name.endswith(("locustfile", "__main__")):
            continue  # the locustfile reads the command line when imported; __main__s run
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == info.name and issubclass(cls, Exception) and name not in _INTERNAL:
                yield f"{info.name}.{name}", cls


def test_every_error_the_load_generator_defines_derives_from_its_root():
    found = dict(_public_error_classes())
    assert "loadgen.scenario.errors.ScenarioError" in found and "loadgen.commands.common.CliError" in found
    assert [name for name, cls in found.items() if not issubclass(cls, LoadgenError)] == []


def test_the_older_bases_are_kept():
    from loadgen.netem.process import NetemError
    from loadgen.replay.source import ReplayFileError
    from loadgen.replay.writer import TraceFileError

    assert issubclass(ReplayFileError, ValueError) and issubclass(TraceFileError, ValueError)
    assert issubclass(NetemError, RuntimeError)
