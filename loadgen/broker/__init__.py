"""A private, throwaway RabbitMQ node (`sojourn broker up|down|status`): see loadgen.broker.managed."""

from __future__ import annotations

from loadgen.broker.config import (
    DEFAULT_SETTINGS,
    BrokerSettingsError,
    effective_settings,
    parse_setting,
    render_config,
    watermark_settings,
)
from loadgen.broker.managed import (
    DEFAULT_PORT,
    BrokerError,
    BrokerNotInstalled,
    BrokerPortInUse,
    BrokerStartFailed,
    BrokerStatus,
    ManagedBroker,
    StartResult,
    default_dir,
    find_rabbitmq,
)

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_SETTINGS",
    "BrokerError",
    "BrokerNotInstalled",
    "BrokerPortInUse",
    "BrokerSettingsError",
    "BrokerStartFailed",
    "BrokerStatus",
    "ManagedBroker",
    "StartResult",
    "default_dir",
    "effective_settings",
    "find_rabbitmq",
    "parse_setting",
    "render_config",
    "watermark_settings",
]
