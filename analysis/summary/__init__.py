"""The summary layer: collects the small results of the transforms (`.collect()`, `.first()`) and
shapes them into summary.json's blocks (docs/summary.md); the transforms never collect.

One module per block; `analysis.job` composes them.
"""

from ._stats import stats_block
from .blocks import consumer_row, messages_block, phase_row, run_block, window_row
from .churn import CHURN_FIELDS, churn_block
from .codel import codel_block
from .egress import egress_block
from .fidelity import LATE_MAX_MS, LATE_P99_MS, REPLAY_CONFIG_KEYS, fidelity_block, is_behind
from .flow_control import blocked_periods, flow_control_block
from .model import CODEL_TARGET_PROCESSING_TIMES, advise, model_block, model_row, predict
from .outcomes import outcomes_block
from .priority import carries_priorities, priority_rows
from .slow_consumers import slow_consumers_block

__all__ = [
    "stats_block",
    "consumer_row",
    "messages_block",
    "phase_row",
    "run_block",
    "window_row",
    "CHURN_FIELDS",
    "churn_block",
    "outcomes_block",
    "codel_block",
    "egress_block",
    "LATE_MAX_MS",
    "LATE_P99_MS",
    "REPLAY_CONFIG_KEYS",
    "fidelity_block",
    "is_behind",
    "blocked_periods",
    "flow_control_block",
    "CODEL_TARGET_PROCESSING_TIMES",
    "advise",
    "model_block",
    "model_row",
    "predict",
    "carries_priorities",
    "priority_rows",
    "slow_consumers_block",
]
