"""The load-generation half of sojourn: scenarios, Locust users, pika transport, traces."""

__version__ = "0.1.0"
