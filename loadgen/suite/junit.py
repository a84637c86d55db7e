"""JUnit XML for a nightly: one test case per scenario run, per SLO and per regression check,
so a CI server shows which scenario and which expression failed, with the measured value."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

__all__ = ["CaseResult", "write_junit"]


@dataclass(frozen=True)
class CaseResult:
    classname: str  # the suite entry, e.g. "nightly.quickstart"
    name: str  # "run", "slo: sojourn_ms.p99 < 250", "regression: sojourn_ms.p99"
    failure: str | None = None  # None = passed
    seconds: float = 0.0


def write_junit(path: str, suite_name: str, cases: list[CaseResult]) -> None:
    failures = sum(c.failure is not None for c in cases)
    root = ET.Element("testsuites", name=suite_name, tests=str(len(cases)), failures=str(failures))
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite_name,
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        time=f"{sum(c.seconds for c in cases):.3f}",
    )
    for c in cases:
        tc = ET.SubElement(ts, "testcase", classname=c.classname, name=c.name, time=f"{c.seconds:.3f}")
        if c.failure is not None:
            ET.SubElement(tc, "failure", message=c.failure).text = c.failure
    ET.indent(root)
    tmp = f"{path}.tmp"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
