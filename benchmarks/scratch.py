"""The scratch directories of a benchmark's trials: gone when the process that made them ends.

A trial's run directory, trace files and start file matter only while it runs (what it measures is
returned or printed); left in /tmp, every round of every benchmark, and every suite that runs them,
added a few more (up to 5 MB each).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile


def scratch_dir(prefix: str) -> str:
    """A new directory under the system's temporary directory, removed with all it holds when this
    process exits (normally or by an exception)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path
