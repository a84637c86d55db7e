"""The private pika attributes sojourn relies on, checked once when each module that uses them loads.

loadgen.amqp.fastio, kstamp and cancel patch pika's internals and link.py reads two of them; none
is pika's public API, so a pika release may rename one. Each module calls `check(name)` at import:
what is missing is logged once, naming the installed pika version and the attributes, and the
module falls back to pika's own behaviour (fastio: pika's writes; kstamp: receive time read after
the read; cancel: pika requeues a delivery that crossed a basic.cancel; link: pika's own state),
instead of failing mid-run on an AttributeError. pyproject.toml bounds pika to the versions the
suite has run on.

An attribute counts as present when the class (or a base) has it, or when code of the class
assigns it (`self._cancelled = set()` in `__init__`): instance attributes exist only on
instances, and a check at import has none.
"""

from __future__ import annotations

import dis
import importlib
import logging
from collections.abc import Mapping

__all__ = ["NEEDED", "check", "missing", "pika_version"]

log = logging.getLogger("sojourn")

_IO = "pika.adapters.utils.io_services_utils"
NEEDED: Mapping[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    # module -> (pika module, class, attributes) it relies on
    "fastio": (
        (
            _IO,
            "_AsyncPlaintextTransport",
            ("_tx_buffers", "_tx_buffered_byte_count", "_sock", "_sigint_safe_send", "_produce", "_on_socket_writable"),
        ),
        ("pika.connection", "Connection", ("_adapter_emit_data", "_body_max_length")),
        ("pika.adapters.base_connection", "BaseConnection", ("_transport",)),
    ),
    "kstamp": (
        (_IO, "_AsyncPlaintextTransport", ("_sock", "_protocol", "_state", "_MAX_RECV_BYTES", "_consume")),
        (_IO, "_AsyncSSLTransport", ("_sock", "_sigint_safe_recv", "_consume")),
        ("pika.adapters.base_connection", "BaseConnection", ("_transport",)),
    ),
    "cancel": (("pika.channel", "Channel", ("_on_deliver", "_cancelled")),),
    "link": (
        ("pika.connection", "Connection", ("_frame_buffer",)),
        ("pika.adapters.base_connection", "BaseConnection", ("_transport",)),
        (_IO, "_AsyncTransportBase", ("get_write_buffer_size",)),
    ),
}

_FALLBACK = {
    "fastio": "pika's own writes are used (one send() per frame)",
    "kstamp": "receive times are read after each read instead of the kernel's stamps",
    "cancel": "a delivery that crosses a basic.cancel is requeued by pika unseen, as pika does",
    "link": "the link reads pika's public state only",
}


def pika_version() -> str:
    try:
        import pika

        return str(getattr(pika, "__version__", "unknown"))
    except ImportError:  # pragma: no cover - sojourn depends on pika
        return "not installed"


def _assigned(cls: type) -> set[str]:
    """Attribute names the code of `cls` and its bases assigns (`self.x = ...`: STORE_ATTR)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        for value in vars(klass).values():
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            if code is not None:
                names.update(str(i.argval) for i in dis.get_instructions(code) if i.opname == "STORE_ATTR")
    return names


def missing(module: str, needed: Mapping[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = NEEDED) -> list[str]:
    """`pika.module.Class.attribute` for each attribute `module` (a key of NEEDED) relies on that
    this pika lacks; a missing pika module or class is named as such."""
    out: list[str] = []
    for mod_name, cls_name, attrs in needed[module]:
        try:
            cls = getattr(importlib.import_module(mod_name), cls_name)
        except (ImportError, AttributeError):
            out.append(f"{mod_name}.{cls_name}")
            continue
        assigned = _assigned(cls)
        out += [f"{mod_name}.{cls_name}.{a}" for a in attrs if not hasattr(cls, a) and a not in assigned]
    return out


def check(module: str) -> list[str]:
    """missing(module), logged once as a warning naming pika's version and what falls back."""
    gone = missing(module)
    if gone:
        log.warning(
            "sojourn's loadgen.amqp.%s needs pika internals that pika %s lacks: %s; %s. sojourn is tested "
            "with the pika versions pyproject.toml allows",
            module,
            pika_version(),
            ", ".join(gone),
            _FALLBACK[module],
        )
    return gone
