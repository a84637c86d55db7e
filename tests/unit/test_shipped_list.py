"""The README and docs/scenarios.md list every shipped scenario, and say how many there are: a
scenario added without a line in either fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml"))
_WORDS = """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty"""
NUMBERS = dict(enumerate(_WORDS.split()))


def test_the_readme_lists_every_shipped_scenario_and_their_number():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Scenarios shipped", 1)[1].split("\n## ", 1)[0]
    listed = sorted(re.findall(r"^- `([\w.-]+\.yaml)`", section, re.M))
    assert listed == SHIPPED
    assert section.strip().lower().startswith(f"{NUMBERS[len(SHIPPED)]} commented scenarios")


def test_docs_scenarios_lists_every_shipped_scenario_and_their_number():
    docs = (ROOT / "docs" / "scenarios.md").read_text()
    section = docs.split("## The shipped examples", 1)[1].split("\n## ", 1)[0]
    listed = sorted(re.findall(r"^- `scenarios/([\w.-]+\.yaml)`", section, re.M))
    assert listed == SHIPPED
    assert f"{NUMBERS[len(SHIPPED)].capitalize()} commented example scenarios" in docs
