"""py4j's log records go to the JVM's log file, not to the user's terminal.

py4j logs a few records with the logging module's own functions (`logging.exception`,
`logging.info`), on the root logger. With no handler there, the first of them configures one that
writes to stderr (`logging.basicConfig`): Ctrl-C while the driver waited for the JVM printed two
py4j tracebacks ("ERROR:root:KeyboardInterrupt while sending command.") before sojourn's own line.
`to_log_file(path)` gives the root logger a handler that appends py4j's records to `path` (the
JVM's log, RUN_DIR/spark.log) and passes any other record on as Python would without it:
warnings and worse to stderr when the root logger has no other handler.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import py4j

__all__ = ["to_log_file", "stop_logging"]

_PY4J_DIR = os.path.dirname(os.path.abspath(py4j.__file__)) + os.sep


class _Py4jToFile(logging.FileHandler):
    def __init__(self, path: str | Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)  # the file is opened at its first record
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s py4j: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if os.path.abspath(record.pathname).startswith(_PY4J_DIR):
            super().emit(record)
            return
        root = logging.getLogger()
        alone = all(isinstance(h, _Py4jToFile) for h in root.handlers)
        last_resort = logging.lastResort
        if alone and last_resort is not None and record.levelno >= last_resort.level:
            last_resort.handle(record)  # what Python does with a record no handler takes


def to_log_file(path: str | Path) -> None:
    """From now on py4j's log records are appended to `path` (in place of an earlier call's file)."""
    stop_logging()
    logging.getLogger().addHandler(_Py4jToFile(path))


def stop_logging() -> None:
    """Undo to_log_file: the handler is removed and its file closed."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Py4jToFile)]:
        root.removeHandler(handler)
        handler.close()
