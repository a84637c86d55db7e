"""One exception root for the load generator; the CLI maps each to an exit status."""

from __future__ import annotations

__all__ = [
    "EXIT_INTERNAL",
    "LoadgenError",
    "BrokerUnreachable",
    "BrokerRefused",
    "BrokerOperationFailed",
    "QueueHoldsMessages",
]


EXIT_INTERNAL = 6
"""The exit status of a run a part of the load generator ended: one of its guarded greenlets raised
(loadgen.run.guarded). The run was stopped at once; its traces, census and analysis are as after a stop,
and run.json says status `failed` with the error (`error`, `internal_error`)."""


class LoadgenError(Exception):
    """Root of the load generator's errors."""


class BrokerUnreachable(LoadgenError):
    """The broker could not be reached; `url` is already masked."""

    def __init__(self, url: str, reason: str):
        self.url = url
        self.reason = reason
        super().__init__(f"cannot reach the broker at {url}: {reason}")


class BrokerRefused(BrokerUnreachable):
    """The broker answered and refused the connection: the user or password, or the virtual host
    (a BrokerUnreachable to callers that only need to know there is no connection)."""

    def __init__(self, url: str, reason: str):
        self.url = url
        self.reason = reason
        LoadgenError.__init__(self, f"the broker at {url} refused the connection: {reason}")


class BrokerOperationFailed(LoadgenError):
    """A broker operation was refused (channel or connection closed with a reply code)."""

    def __init__(self, operation: str, reply_code: int | None, reply_text: str):
        self.operation = operation
        self.reply_code = reply_code
        self.reply_text = reply_text
        code = f" {reply_code}" if reply_code is not None else ""
        super().__init__(f"{operation} failed:{code} {reply_text}")


class QueueHoldsMessages(LoadgenError):
    """The run would start on a queue it did not create that holds messages, and the scenario does
    not say whether to purge or keep them (`queue.purge_on_start` absent): nothing is started and
    nothing is purged (exit 2). `where` is "<scenario file>: <YAML path>"; `key` the key to set."""

    def __init__(self, where: str, queue: str, messages: int, key: str = "queue.purge_on_start"):
        self.where = where
        self.queue = queue
        self.messages = messages
        self.key = key
        super().__init__(
            f"{where}: queue {queue!r} already holds {messages:,} message{'' if messages == 1 else 's'} and was "
            f"not created by this run; sojourn does not purge a queue it did not create, nor start on its "
            f"messages, unless the scenario says so.\n"
            f"  Set {key}: true to purge them (they are lost), or {key}: false to keep them and start anyway "
            f"(sojourn's consumers then receive and ack them like any consumer), or name a queue of the run's "
            f"own in queue.name (one that does not exist yet). docs/own-broker.md, "
            f'"What sojourn does to a queue that was there before".'
        )
