"""The command line's ways out that are not a scenario's fault."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_reader_that_goes_away_early_ends_the_output_quietly():
    # `sojourn validate x.yaml | head -c 10`: head exits after 10 bytes; validate then writes on a
    # closed pipe, which must not end in a traceback.
    command = f"{sys.executable} -m loadgen.cli validate scenarios/quickstart.yaml | head -c 10 > /dev/null"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO, capture_output=True, text=True)
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr
    assert out.returncode == 0
