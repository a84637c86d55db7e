"""The environment of a `python -m loadgen...` child process (the trace writer's sink, the
network proxy, `sojourn analyze` after a plain Locust run): this one's, with the directory that
holds the loadgen package first on PYTHONPATH, so a plain checkout (not installed) works too."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["child_env"]

_HOME = str(Path(__file__).resolve().parents[1])  # the directory holding loadgen/


def child_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    return {**environ, "PYTHONPATH": os.pathsep.join(p for p in (_HOME, environ.get("PYTHONPATH")) if p)}
