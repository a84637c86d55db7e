"""Helpers for scenario tests: write YAML to a temporary file, load it, or get the error text."""

from __future__ import annotations

import pathlib

import pytest

from loadgen.scenario import ScenarioError, load_scenario


def load(tmp_path: pathlib.Path, text: str, *overrides: str):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    return load_scenario(path, overrides, env={})


def error(tmp_path: pathlib.Path, text: str, *overrides: str) -> str:
    """The ScenarioError's message after the `<file>: ` prefix."""
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, overrides, env={})
    return str(info.value)[len(f"{path}: ") :]
