"""The transport seam: pika-on-gevent connections, channels and topology."""

from loadgen.amqp.connection import connect, open_channel, parameters, probe, wait_for
from loadgen.amqp.topology import declare_queue, queue_depth

__all__ = ["connect", "open_channel", "parameters", "probe", "wait_for", "declare_queue", "queue_depth"]
