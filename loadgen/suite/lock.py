"""One nightly at a time per results directory: a non-blocking `fcntl.flock` on RESULTS_DIR/.lock.

The holder writes its pid into the file so the refused second run can name it. The kernel
drops the lock when the holder dies, so a crash leaves no stale lock behind.
"""

from __future__ import annotations

import fcntl
import os

from loadgen.errors import LoadgenError

__all__ = ["ResultsLock", "LockHeld"]


class LockHeld(LoadgenError):
    """Another process holds the results directory's lock."""

    def __init__(self, path: str, pid: str) -> None:
        super().__init__(
            f"{path} is held by pid {pid or '?'}: another nightly is running into this "
            f"results directory; wait for it to finish"
        )
        self.path, self.pid = path, pid


class ResultsLock:
    def __init__(self, results_dir: str) -> None:
        self.path = os.path.join(results_dir, ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise LockHeld(self.path, pid) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ResultsLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
