"""Pure DataFrame -> DataFrame steps of the analysis, chained with `df.transform(...)`.

Nothing here reads or writes files, and nothing collects; `analysis.job` reads and writes and
composes these, and `analysis.summary` collects their small results into summary.json's blocks.
"""

from ._common import ACKED_OUTCOMES, Transform
from .accounting import (
    ACCOUNT_CLASSES,
    DEAD_LETTER_CLASSES,
    DISCARD_CLASSES,
    accounting_totals,
    classify,
    delivery_counts,
    drops_past_delivery_limit,
    id_projections,
    ledger,
    message_facts,
    rejects_at_publish,
)
from .codel import NACK_OUTCOMES
from .latency import with_confirm_latency, with_delivery_latencies
from .phases import BASE, Segment, assign_phase, timeline_segments
from .stats import STAT_FIELDS
from .throughput import in_window, measurement_window_ns
from .warmup import attach_intended_ns, attach_measured, attach_publish_times, mark_measured
from .windows import second_since

__all__ = [
    "ACKED_OUTCOMES",
    "Transform",
    "ACCOUNT_CLASSES",
    "DEAD_LETTER_CLASSES",
    "DISCARD_CLASSES",
    "accounting_totals",
    "classify",
    "delivery_counts",
    "ledger",
    "id_projections",
    "message_facts",
    "rejects_at_publish",
    "drops_past_delivery_limit",
    "NACK_OUTCOMES",
    "with_confirm_latency",
    "with_delivery_latencies",
    "BASE",
    "Segment",
    "assign_phase",
    "timeline_segments",
    "STAT_FIELDS",
    "in_window",
    "measurement_window_ns",
    "attach_intended_ns",
    "attach_measured",
    "attach_publish_times",
    "mark_measured",
    "second_since",
]
