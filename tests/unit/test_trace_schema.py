"""The trace contract: both halves derive from one declaration, and the doc matches it."""

from pathlib import Path

import pytest

from analysis import schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "traces.md"


def test_docs_traces_md_lists_exactly_the_declared_columns():
    assert schema.markdown_tables() in DOC.read_text()


_SAME_TYPE = {
    "string": ("string", "string"),
    "int32": ("int32", "int"),
    "int64": ("int64", "bigint"),
    "float64": ("double", "double"),
    "bool": ("bool", "boolean"),
}
"""A declared type, as the writer's Arrow and the analysis's Spark spell it."""


@pytest.mark.parametrize("kind", list(schema.KINDS))
def test_the_writer_and_the_analysis_see_each_column_under_one_name_with_one_type(kind):
    arrow, spark = schema.arrow_schema(kind), schema.spark_schema(kind)
    declared = [(c.name, *_SAME_TYPE[c.type], c.nullable) for c in schema.columns(kind)]
    assert [
        (f.name, str(f.type), s.name, s.dataType.simpleString(), f.nullable)
        for f, s in zip(arrow, spark.fields, strict=True)
    ] == [(name, a, name, s, nullable) for name, a, s, nullable in declared]
    assert arrow.metadata[b"sojourn.schema_version"] == str(schema.SCHEMA_VERSION).encode()
    assert arrow.metadata[b"sojourn.kind"] == kind.encode()


def test_every_kind_starts_with_the_common_columns():
    for kind in schema.KINDS:
        assert schema.column_names(kind)[:3] == ["schema_version", "run_id", "worker"]


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown trace kind 'publishes'"):
        schema.columns("publishes")
