"""The AMQP names sojourn derives from a scenario's own, in one place: the loader checks that they
fit in an AMQP short string (255 bytes) and the runtime declares them."""

from __future__ import annotations

__all__ = ["slot_queue_name", "capture_queue_name"]


def slot_queue_name(queue: str, kind: str, group: str, index: int) -> str:
    """The exclusive queue whose declaration claims slot `index` of a group (runtime.claim_slot)."""
    return f"{queue}.sojourn-slot.{kind}.{group}.{index}"


def capture_queue_name(queue: str) -> str:
    """The queue the dead-letters of `queue` are captured in (loadgen.run.deadletter)."""
    return f"sojourn.{queue}.dead-letters"
