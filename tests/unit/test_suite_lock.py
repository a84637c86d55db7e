"""The results directory lock: one nightly at a time, and the refusal names the holder."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from loadgen.suite import LockHeld, ResultsLock


def test_a_second_holder_is_refused_with_the_first_holders_pid(tmp_path):
    with ResultsLock(str(tmp_path)), pytest.raises(LockHeld) as info:
        ResultsLock(str(tmp_path)).acquire()
    assert info.value.pid == str(os.getpid())
    assert f"held by pid {os.getpid()}" in str(info.value)


def test_another_process_is_refused_while_the_lock_is_held(tmp_path):
    code = (
        "import sys; from loadgen.suite import ResultsLock, LockHeld\n"
        "try:\n    ResultsLock(sys.argv[1]).acquire()\nexcept LockHeld as e:\n    print(e.pid); sys.exit(7)\n"
    )
    with ResultsLock(str(tmp_path)):
        held = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert held.returncode == 7 and held.stdout.strip() == str(os.getpid())
    free = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert free.returncode == 0, free.stderr


def test_the_lock_is_free_again_after_release(tmp_path):
    ResultsLock(str(tmp_path)).__enter__().release()
    with ResultsLock(str(tmp_path)):
        pass
