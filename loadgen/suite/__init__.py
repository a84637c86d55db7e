"""Suites: an ordered list of scenarios with overrides and SLOs, run nightly into one results directory.

`load_suite(path)` reads and validates a suite file (errors are `ScenarioError`, worded and
located like a scenario's); `write_junit`, `ResultsLock` and `prune_runs` are the pieces the
`sojourn nightly` command assembles. The schema is documented in docs/nightly.md.
"""

from loadgen.suite.junit import CaseResult, write_junit
from loadgen.suite.lock import LockHeld, ResultsLock
from loadgen.suite.model import Suite, SuiteEntry, is_suite_document, load_suite, with_overrides
from loadgen.suite.retention import prune_runs, run_dir_name

__all__ = [
    "load_suite",
    "with_overrides",
    "is_suite_document",
    "Suite",
    "SuiteEntry",
    "write_junit",
    "CaseResult",
    "ResultsLock",
    "LockHeld",
    "prune_runs",
    "run_dir_name",
]
