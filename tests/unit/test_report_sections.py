"""The report's navigation against the sections the page shows, from hand-built summaries (no Spark,
no broker): one link per section, in page order, and none for a section the page leaves out."""

from __future__ import annotations

import re

import pytest

from analysis.report import render_report
from tests.unit.test_report import make_summary, visible_text
from tests.unit.test_report_churn import churn_block
from tests.unit.test_report_codel import codel_block
from tests.unit.test_report_egress import egress_block
from tests.unit.test_report_fidelity import replayed, synthetic
from tests.unit.test_report_network import network_block
from tests.unit.test_report_outcomes import SINGLE_ACTIVE, STREAM, outcomes_block
from tests.unit.test_report_priorities import FLOW, ROWS
from tests.unit.test_report_slow_consumers import BLOCK, DEPTH

#: Every section of a summary that has every block, in the order a reader scrolls through them.
EVERY_SECTION = [
    "verdict",
    "numbers",
    "throughput",
    "sojourn",
    "components",
    "distribution",
    "cdf",
    "model",
    "network",
    "codel",
    "egress",
    "churn",
    "outcomes",
    "single_active",
    "stream",
    "fidelity",
    "slow_consumers",
    "latency",
    "consumers",
    "phases",
    "accounting",
    "priorities",
    "flow_control",
    "events",
]


def full_summary() -> dict:
    """make_summary() with every optional block the other report tests build."""
    summary = make_summary()
    summary.update(
        network=network_block(),
        codel=codel_block(),
        egress=egress_block(),
        consumers_churn=churn_block(),
        outcomes=outcomes_block(),
        single_active_consumer=SINGLE_ACTIVE,
        stream=STREAM,
        fidelity={"orders": replayed(), "steady": synthetic()},
        slow_consumers=BLOCK,
        queue_depth=DEPTH,
        priorities=ROWS,
        flow_control=FLOW,
    )
    return summary


def nav_links(page: str) -> list[tuple[str, str]]:
    """(target id, link text) of each link in the navigation, in order."""
    nav = re.search(r'<nav class="toc">(.*?)</nav>', page, re.S)
    assert nav, "no navigation"
    return [(target, visible_text(text)) for target, text in re.findall(r'<a href="#([^"]+)">(.*?)</a>', nav.group(1))]


def section_ids(page: str) -> list[str]:
    main = re.search(r"<main>(.*)</main>", page, re.S)
    assert main, "no <main>"
    return re.findall(r'<section id="([^"]+)"', main.group(1))


def headings(page: str) -> dict[str, str]:
    """Section id -> the text of its <h2>."""
    return {sid: visible_text(h2) for sid, h2 in re.findall(r'<section id="([^"]+)"[^>]*><h2>(.*?)</h2>', page, re.S)}


@pytest.fixture(scope="module")
def full_page() -> str:
    return render_report(full_summary())


def test_a_summary_with_every_block_shows_every_section_in_reading_order(full_page):
    assert section_ids(full_page) == EVERY_SECTION


def test_the_navigation_links_every_section_the_page_shows_in_the_same_order(full_page):
    assert [target for target, _ in nav_links(full_page)] == section_ids(full_page)


def test_network_codel_replay_fidelity_and_slow_consumers_are_in_the_navigation(full_page):
    links = dict(nav_links(full_page))
    assert links["network"] == "Network impairment"
    assert links["codel"] == "CoDel"
    assert links["fidelity"] == "Replay fidelity"
    assert links["slow_consumers"] == "Slow consumers"


def test_each_link_reads_as_the_heading_of_its_section(full_page):
    titled = headings(full_page)
    assert {target: text for target, text in nav_links(full_page) if target in titled} == titled
    assert dict(nav_links(full_page))["verdict"] == "Verdict"  # the verdict strip has no heading


def test_a_run_without_replay_links_its_fidelity_section_as_publish_lateness():
    summary = make_summary()
    summary["fidelity"] = {"steady": synthetic()}
    assert dict(nav_links(render_report(summary)))["fidelity"] == "Publish lateness"


@pytest.mark.parametrize(
    "section_id, without",
    [
        ("network", {"network": None}),
        ("codel", {"codel": {"consumers": []}}),
        ("egress", {"egress": {}}),
        ("churn", {"consumers_churn": {"churn": False}}),
        ("outcomes", {"outcomes": {}}),
        ("single_active", {"single_active_consumer": {}}),
        ("fidelity", {"fidelity": None}),
        ("slow_consumers", {"slow_consumers": {}, "queue_depth": []}),
        ("priorities", {"priorities": ["not a row"]}),  # was linked, with no section to go to
        ("flow_control", {"flow_control": {}}),
    ],
)
def test_a_section_without_its_data_is_neither_on_the_page_nor_in_the_navigation(section_id, without):
    page = render_report({**full_summary(), **without})
    expected = [sid for sid in EVERY_SECTION if sid != section_id]
    assert section_ids(page) == expected
    assert [target for target, _ in nav_links(page)] == expected


def test_a_summary_without_optional_blocks_links_only_the_sections_every_page_has():
    page = render_report(make_summary())
    always = [
        "verdict",
        "numbers",
        "throughput",
        "sojourn",
        "components",
        "distribution",
        "cdf",
        "model",
        "latency",
        "consumers",
        "phases",
        "accounting",
        "events",
    ]
    assert section_ids(page) == always
    assert [target for target, _ in nav_links(page)] == always
