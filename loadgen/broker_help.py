"""What to tell a user whose broker can not be used: start one, fix the user or the password, the
virtual host, or TLS. Said by every command (loadgen.commands) and by a Locust run that could not
reach its broker (loadgen.run.locust_session)."""

from __future__ import annotations

from loadgen.errors import BrokerRefused

__all__ = ["BROKER_HELP", "AUTH_HELP", "VHOST_HELP", "TLS_HELP", "broker_help"]

BROKER_HELP = """\
Start a local RabbitMQ and try again:
  sojourn broker up --port 5672        # a private node of sojourn's own (docs/broker.md)
  rabbitmq-server -detached            # the system's, installed but stopped
  apt-get install -y rabbitmq-server   # not installed (Debian/Ubuntu)
or point sojourn at another broker with SOJOURN_AMQP_URL=amqp://user:pass@host:5672/ (amqps:// for TLS)."""

AUTH_HELP = """The broker answered and refused the user or the password in the URL (SOJOURN_AMQP_URL, --set
broker.url or the scenario's broker.url): check both. RabbitMQ's guest user may connect only
from localhost; for another host create a user (rabbitmqctl add_user, set_permissions)."""

VHOST_HELP = """The broker answered and refused the virtual host, the last part of the URL (amqp://user:pass@host:5672/VHOST;
%2F is the default "/"): check that it exists (rabbitmqctl list_vhosts) and that the user has
permissions on it (rabbitmqctl set_permissions -p VHOST USER ".*" ".*" ".*")."""

TLS_HELP = """The broker answered but the TLS handshake failed. Check that SOJOURN_TLS_CAFILE names the CA that
signed the broker's certificate and that the URL's host is a name in it (SOJOURN_TLS_INSECURE=1
skips verification, for a throwaway test broker only), and that the port is the broker's TLS
listener (5671 by default)."""


def broker_help(exc: BaseException) -> str:
    """What to do about a broker that can not be used: for a refused user or virtual host and for a
    failed TLS handshake the advice for that (starting a local RabbitMQ would not help), else how
    to start one."""
    if isinstance(exc, BrokerRefused):
        return VHOST_HELP if "virtual host" in exc.reason else AUTH_HELP
    text = str(exc)
    tls = ("SSL", "CERTIFICATE", "TLS", "WRONG_VERSION_NUMBER", "certificate")
    return TLS_HELP if any(word in text for word in tls) else BROKER_HELP
