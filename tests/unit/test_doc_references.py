"""Every relative link and file reference in README.md, docs/ and scenarios/ resolves: a reader who
follows one lands on a file of this repository (and, for a link with `#anchor`, on a heading of
it), and no page points outside the repository for the project's own background (issue 50)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
SCENARIO_FILES = sorted(p for p in (ROOT / "scenarios").rglob("*") if p.suffix in (".yaml", ".yml", ".md"))

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_REFERENCE = re.compile(
    r"(?<![\w/.-])((?:docs|scenarios|tests|analysis|loadgen|benchmarks|scripts|examples)/[\w./-]*\w)"
)
_MADE_UP = {"scenarios/x.yaml"}
"""A file name the pages make up for their examples of error messages."""
_BUILT = {"loadgen/example_scenarios": "setup.py"}
"""Paths that exist in the built wheel only, each with the file that makes it."""
_HISTORY = {ROOT / "docs" / "benchmarks.md"}
"""Its notes are the benchmarks' dated history (benchmarks/NOTES.md), which names files since removed:
its links are checked, its bare paths are not."""


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation but `-` and `_` dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings (a repeated heading's later ones numbered -1, -2...)."""
    seen: Counter[str] = Counter()
    out = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = _slug(line.lstrip("#"))
        out.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of `page` whose file, or heading, is not there."""
    broken = []
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(root)}")
    return broken


def broken_references(page: Path, root: Path = ROOT) -> list[str]:
    """The repository paths named in `page` (`docs/x.md`, `analysis/job.py`, a module as
    `analysis/traces`) that are not in the repository."""
    broken = []
    for name in _REFERENCE.findall(page.read_text(encoding="utf-8")):
        name = name.rstrip(".")
        if name in _MADE_UP or name in _BUILT:
            continue
        if not ((root / name).exists() or (root / f"{name}.py").exists()):
            broken.append(name)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands_on_a_file_and_heading(page):
    assert broken_links(page) == []


@pytest.mark.parametrize(
    "page", [p for p in [*PAGES, *SCENARIO_FILES] if p not in _HISTORY], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_file_a_page_names_is_in_the_repository(page):
    assert broken_references(page) == []


@pytest.mark.parametrize("page", [*PAGES, *SCENARIO_FILES], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_background_is_the_projects_own_page(page):
    # the queueing arithmetic, CoDel, egress classes and flow control are docs/queueing.md's
    assert "DOMAIN" not in page.read_text(encoding="utf-8")


def test_the_wheel_only_paths_are_still_made_by_their_builder():
    for name, builder in _BUILT.items():
        assert name.split("/")[-1] in (ROOT / builder).read_text(encoding="utf-8"), (name, builder)


def test_the_checks_find_a_broken_link_a_missing_heading_and_a_missing_file(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# A heading\n## The `flow_control` block\n", encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "[ok](there.md#the-flow_control-block) [gone](gone.md) [no heading](there.md#nowhere) "
        "[web](https://example.org/x.md) docs/there.md and docs/missing.md\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "gone.md: no such file",
        "there.md#nowhere: no heading #nowhere in docs/there.md",
    ]
    assert broken_references(page, tmp_path) == ["docs/missing.md"]
