"""Scenario advice: settings that are valid but can not do what they are there for, said as
warnings before a run (`sojourn run`, `sojourn validate`; exit status unchanged). The rules they
follow are the CoDel controller's (loadgen.rules.codel) and the egress buffer's (loadgen.rules.egress)."""

from __future__ import annotations

from loadgen.rules.codel import INTERVAL_RATIO_LIMIT, SMALL_BACKLOG
from loadgen.rules.egress import work_units
from loadgen.scenario.model import Scenario

__all__ = ["codel_warnings", "egress_warnings"]


def codel_warnings(scenario: Scenario) -> list[str]:
    """Warnings (not errors) about each consumer group's CoDel settings.

    - CoDel can never act when the buffer can never hold a standing queue:
      when the application takes a delivery, at most `prefetch` deliveries are
      unacked and waiting, so at most `prefetch - 1` stay behind it; a backlog of
      at most one (SMALL_BACKLOG) is never above target, so prefetch <= 2 never drops.
    - Nor when target exceeds the most the buffer can hold: a delivery waits at
      most for the `prefetch - 1` ahead of it (one of them already being
      processed), about `(prefetch - 1) x mean processing time`. If target is
      above that in every phase, sojourn never stays above target.
    - `interval` is meant to be about the worst-case processing time of one
      message; more than INTERVAL_RATIO_LIMIT times off the group's mean
      processing time either way reacts far too slowly or nacks normal jitter.
    - auto-ack deliveries can not be nacked: CoDel is ignored there.
    """
    warnings: list[str] = []
    for base in scenario.consumers:
        spec = base.codel
        if spec is None:
            continue
        name = f"consumers.{base.name}.codel"
        if base.ack_mode == "auto":
            warnings.append(
                f"{name}: ack_mode is auto, so deliveries can not be nacked; CoDel is ignored "
                f"for this group (use ack_mode: manual)"
            )
            continue
        settings = [effective.consumer(base.name) for effective in scenario.settings_over_time()]
        prefetches = [g.prefetch for g in settings]
        if all(0 < p <= SMALL_BACKLOG + 1 for p in prefetches):
            warnings.append(
                f"{name}: prefetch {max(prefetches)} can never build a standing queue (at most "
                f"{max(prefetches) - 1} delivery waits behind the one taken), so CoDel never nacks; "
                f"use a prefetch of at least {SMALL_BACKLOG + 2}"
            )
            continue
        most = [((g.prefetch - 1) * g.processing.mean_ms, g) for g in settings if g.prefetch > 0]
        if most and len(most) == len(settings) and all(spec.target_ms > held for held, _ in most):
            held, g = max(most, key=lambda item: item[0])
            warnings.append(
                f"{name}: target_ms {spec.target_ms:g} is more than the buffer can ever hold: "
                f"(prefetch {g.prefetch} - 1) x mean processing {g.processing.mean_ms:g} ms = {held:g} ms, "
                f"so sojourn never stays above target and CoDel never nacks; lower target_ms "
                f"or raise the prefetch"
            )
        mean_ms = base.processing.mean_ms
        if mean_ms > 0:
            ratio = spec.interval_ms / mean_ms
            if ratio > INTERVAL_RATIO_LIMIT or ratio < 1 / INTERVAL_RATIO_LIMIT:
                side = "above" if ratio > 1 else "below"
                warnings.append(
                    f"{name}: interval_ms {spec.interval_ms:g} is {max(ratio, 1 / ratio):.3g}x {side} the "
                    f"mean processing time {mean_ms:g} ms; interval should be about the worst-case "
                    f"processing time of one message (within {INTERVAL_RATIO_LIMIT:g}x)"
                )
    return warnings


def egress_warnings(scenario: Scenario) -> list[str]:
    """Warnings (not errors) about consumer groups whose egress classes can never discard.

    With manual ack the broker stops at `prefetch` unacked deliveries, so a class never holds
    more than `prefetch` messages of at most the producers' largest size: if that many messages
    are not more than `min_burst`, or their work units not more than `max_depth_units` (in every
    phase), nothing is ever discarded. Auto-ack (a Solace "direct" subscriber: the broker pushes
    without waiting for acks) or prefetch 0 leaves the buffer unbounded, the natural fit.
    Replayed sizes are not known before the run: groups fed only by replays are not checked.
    """
    warnings: list[str] = []
    over_time = scenario.settings_over_time()
    sizes = [g.size_bytes for effective in over_time for g in effective.producers if g.replay is None]
    if not sizes or any(g.replay is not None for g in scenario.producers):
        return warnings
    largest = max(sizes)
    units = work_units(largest)
    for base in scenario.consumers:
        spec = base.egress
        if spec is None or base.ack_mode == "auto":
            continue
        prefetches = [effective.consumer(base.name).prefetch for effective in over_time]
        if 0 in prefetches:
            continue
        most = max(prefetches)
        if most * units <= spec.max_depth_units or most <= spec.min_burst:
            warnings.append(
                f"consumers.{base.name}.egress: with ack_mode manual a class holds at most prefetch {most} "
                f"messages x {units} work unit{'s' if units > 1 else ''} (the largest message, {largest} B) = "
                f"{most * units} units"
                + (
                    f", not more than max_depth_units {spec.max_depth_units}"
                    if most * units <= spec.max_depth_units
                    else f", and {most} messages are not more than min_burst {spec.min_burst}"
                )
                + ", so nothing is ever discarded; use ack_mode: auto (a Solace direct subscriber: the broker "
                "pushes without waiting for acks) or raise the prefetch"
            )
    return warnings
