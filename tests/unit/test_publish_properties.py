"""A synthetic publish's properties go on the wire exactly as pika would encode them."""

import time

import pika
import pytest

from loadgen.amqp.fastio import SojournProperties


def _pika_bytes(delivery_mode: int, message_id: str, publish_ns: int) -> bytes:
    props = pika.BasicProperties(
        delivery_mode=delivery_mode,
        message_id=message_id,
        headers={"sojourn-id": message_id, "sojourn-pub-ns": publish_ns},
    )
    return b"".join(props.encode())


@pytest.mark.parametrize(
    "message_id",
    ["run:p/host-1/0:0", "run-2026-11-21:grp/vm-31471/12:987654321", "ünïcode-run:p/w/0:5", "x" * 255, "x" * 300],
)
@pytest.mark.parametrize("delivery_mode", [1, 2])
@pytest.mark.parametrize("publish_ns", [1_795_292_889_153_618_331, 2**31, 5])
def test_the_bytes_are_pikas(message_id, delivery_mode, publish_ns):
    if len(message_id.encode()) > 255:  # too long for a short string: pika's error, unchanged
        with pytest.raises(pika.exceptions.ShortStringTooLong):
            SojournProperties(delivery_mode, message_id, publish_ns).encode()
        return
    got = b"".join(SojournProperties(delivery_mode, message_id, publish_ns).encode())
    assert got == _pika_bytes(delivery_mode, message_id, publish_ns)


def test_a_consumer_decodes_the_id_and_the_publish_time():
    ns = time.time_ns()
    decoded = pika.BasicProperties()
    decoded.decode(b"".join(SojournProperties(2, "run:p/w/0:7", ns).encode()))
    assert (decoded.delivery_mode, decoded.message_id, decoded.priority) == (2, "run:p/w/0:7", None)
    assert decoded.headers == {"sojourn-id": "run:p/w/0:7", "sojourn-pub-ns": ns}


def test_the_publish_time_a_consumer_traces_is_a_plain_int_that_marshal_takes():
    import marshal

    from loadgen.users.consumer import header_int

    ns = time.time_ns()
    decoded = pika.BasicProperties()
    decoded.decode(b"".join(SojournProperties(2, "run:p/w/0:7", ns).encode()))
    raw = decoded.headers["sojourn-pub-ns"]
    with pytest.raises(ValueError):  # what pika hands over: its int subclass
        marshal.dumps(raw)
    value = header_int(raw)
    assert type(value) is int and value == ns and marshal.loads(marshal.dumps(value)) == ns
    assert [header_int(v) for v in (None, "123", 1.5, True)] == [None, None, None, None]  # foreign headers
