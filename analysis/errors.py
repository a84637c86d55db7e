"""The one exception root of the analysis package, with structured fields.

Everything the job refuses (a missing run.json, a trace with missing columns or
from another schema version) is an `AnalysisError`; the CLI catches it and exits.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "spark_failure",
    "AnalysisError",
    "RunFileError",
    "MissingTracesError",
    "TraceColumnsError",
    "SchemaVersionError",
]


class AnalysisError(Exception):
    """Root of every error the analysis raises on purpose; `path` names the bad file."""

    def __init__(self, message: str, *, path: str | Path | None = None):
        super().__init__(message)
        self.path = str(path) if path is not None else None


class RunFileError(AnalysisError):
    """run.json is missing, not JSON, or lacks a field the analysis needs."""

    def __init__(self, message: str, *, path: str | Path, key: str | None = None):
        super().__init__(message, path=path)
        self.key = key


class MissingTracesError(AnalysisError):
    """RUN_DIR/traces is missing, or holds no trace part file at all."""


class TraceColumnsError(AnalysisError):
    """A trace part file lacks columns of the schema (or has them with the wrong type)."""

    def __init__(
        self,
        *,
        path: str | Path,
        kind: str,
        missing: Sequence[str],
        present: Sequence[str],
        wrong_types: Sequence[str] = (),
    ):
        self.kind = kind
        self.missing = list(missing)
        self.present = list(present)
        self.wrong_types = list(wrong_types)
        parts = []
        if self.missing:
            parts.append(f"missing columns: {', '.join(self.missing)}")
        if self.wrong_types:
            parts.append(f"wrong types: {', '.join(self.wrong_types)}")
        super().__init__(
            f"{path}: {kind} trace does not match the schema; {'; '.join(parts)} "
            f"(present columns: {', '.join(self.present) or 'none'})",
            path=path,
        )


class SchemaVersionError(AnalysisError):
    """A trace was written with another trace schema version than this analysis reads."""

    def __init__(self, message: str, *, path: str | Path, found: object, expected: int):
        super().__init__(message, path=path)
        self.found = found
        self.expected = expected


def spark_failure(exc: BaseException, log: str) -> str:
    """What a command says of a failure inside Spark (a JVM out of memory, a lost cluster): the
    error's first line, not a Java stack trace; a hint for an out-of-memory; and the JVM's log."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    hint = (
        " (the JVM ran out of memory; give it more with PYSPARK_SUBMIT_ARGS='--driver-memory 8g "
        "pyspark-shell', or analyze on a cluster with --master)"
        if "OutOfMemoryError" in str(exc)
        else ""
    )
    return f"{first[:300]}{hint}\n  the JVM's log: {log}"
