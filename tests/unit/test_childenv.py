"""A `python -m loadgen...` child finds the package first, keeping the caller's PYTHONPATH after it."""

from __future__ import annotations

import os
from pathlib import Path

from loadgen.childenv import child_env

HOME = str(Path(__file__).resolve().parents[2])  # the checkout that holds loadgen/


def test_the_package_home_goes_first_and_the_callers_path_is_kept():
    env = child_env({"PYTHONPATH": "/opt/x", "OTHER": "1"})
    assert env["PYTHONPATH"] == os.pathsep.join([HOME, "/opt/x"]) and env["OTHER"] == "1"


def test_an_absent_or_empty_pythonpath_adds_no_empty_entry():
    assert child_env({})["PYTHONPATH"] == HOME
    assert child_env({"PYTHONPATH": ""})["PYTHONPATH"] == HOME
