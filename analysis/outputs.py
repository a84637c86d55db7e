"""Writing what an analysis leaves in the run directory (summary.json, report.html).

Standard library only: a command whose analysis ran elsewhere (analysis.analyst) writes them too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["write"]


def write(run_dir: str | Path, files: Mapping[str, str]) -> None:
    """Write each of `files` (name -> text) into the run directory whole or not at all (a temporary
    file renamed over it), in their order."""
    for name, text in files.items():
        path = Path(run_dir) / name
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
