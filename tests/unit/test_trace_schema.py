"""The trace contract: both halves derive from one declaration, and the doc matches it."""
from pathlib import Path

import pytest

from analysis import schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "traces.md"


def test_docs_traces_md_lists_exactly_the_declared_columns():
    assert schema.markdown_tables() in DOC.read_text()


@pytest.mark.parametrize("kind", list(schema.KINDS))
def test_arrow_schema_has_the_declared_columns_in_order(kind):
    arrow = schema.arrow_schema(kind)
    assert arrow.names == schema.column_names(kind)
    assert arrow.metadata[b"sojourn.schema_version"] == str(schema.SCHEMA_VERSION).encode()


def test_every_kind_starts_with_the_common_columns():
    for kind in schema.KINDS:
        assert schema.column_names(kind)[:3] == ["schema_version", "run_id", "worker"]


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown trace kind 'publishes'"):
        schema.columns("publishes")
