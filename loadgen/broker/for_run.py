"""The broker a `sojourn run` uses: the scenario's, a private node it asks for, or, when nothing
answers at the default URL, a private node started on the spot (docs/broker.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from loadgen.amqp.connection import probe
from loadgen.broker.managed import DEFAULT_PORT, BrokerNotInstalled, ManagedBroker, default_dir
from loadgen.errors import BrokerRefused, BrokerUnreachable
from loadgen.redact import mask_url

__all__ = ["broker_for_run"]


@contextmanager
def broker_for_run(scenario, say: Callable[[str], None]) -> Iterator[str | None]:
    """Make sure a broker answers for the run; yield the URL to use instead of the scenario's
    (None: the scenario's own). A node started here is stopped on exit, unless `managed.keep`.

    Raises BrokerUnreachable when nothing answers and no private node can stand in, and
    BrokerError when a private node fails to start.
    """
    b = scenario.broker
    if b.managed is not None:
        broker = ManagedBroker(default_dir(b.managed.port), b.managed.port, dict(b.managed.settings))
        with _running(broker, say, keep=b.managed.keep):
            yield None
        return
    try:
        probe(b.url, timeout_s=b.connect_timeout_s)
    except BrokerRefused:
        raise  # a broker answers there: a private node could not take its port, nor fix the user
    except BrokerUnreachable:
        if not b.url_is_default:
            raise
        broker = ManagedBroker(default_dir(DEFAULT_PORT), DEFAULT_PORT)
        say(
            f"nothing answers on {mask_url(b.url)}: starting a private RabbitMQ node on port {DEFAULT_PORT} "
            "for this run (docs/broker.md)"
        )
        try:
            with _running(broker, say, keep=False):
                yield broker.url
        except BrokerNotInstalled:
            raise BrokerUnreachable(
                mask_url(b.url), "nothing answers there, and rabbitmq-server is not installed to start a private node"
            ) from None
        return
    yield None


@contextmanager
def _running(broker: ManagedBroker, say: Callable[[str], None], keep: bool) -> Iterator[None]:
    if broker.is_running():
        say(
            f"using the private node {broker.node} already running from {broker.dir} "
            "(its settings are as it was started with; `sojourn broker down` to restart it)"
        )
        yield
        return
    try:  # e.g. `sojourn broker up --port N --dir elsewhere` before the run
        probe(broker.url, timeout_s=2.0)
    except BrokerUnreachable:
        pass
    else:
        say(
            f"a broker already answers on {mask_url(broker.url)}: using it as it is (not started by "
            "this run, so its settings are its own and it is left running)"
        )
        yield
        return
    result = broker.start(progress=say)
    say(
        f"private node {broker.node} up on {mask_url(broker.url)} after {result.seconds:.1f} s "
        f"(watermark {broker.watermark})"
    )
    try:
        yield
    finally:
        if keep:
            say(f"leaving {broker.node} running: sojourn broker down --dir {broker.dir}")
        else:
            say(f"stopping the private node {broker.node}")
            broker.stop()
