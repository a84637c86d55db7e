"""One exception root for the load generator; the CLI maps each to an exit status."""

from __future__ import annotations

__all__ = ["LoadgenError", "BrokerUnreachable", "BrokerRefused", "BrokerOperationFailed"]


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
