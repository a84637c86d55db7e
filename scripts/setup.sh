#!/usr/bin/env bash
# Set up everything sojourn needs on this machine: a virtualenv with the package,
# Java for PySpark, and a running RabbitMQ on 127.0.0.1:5672.
#   scripts/setup.sh                    # install into .venv; start RabbitMQ if it is installed but stopped
#   scripts/setup.sh --install-broker   # also apt-get install python3-venv, Java, RabbitMQ, Chromium, Prometheus when
#                                       # missing (as root; CI does this)
#   scripts/setup.sh --private-node-ok  # an installed RabbitMQ that will not start is no error: `sojourn run`
#                                       # starts a private node of its own (scripts/demo.sh does this)
set -euo pipefail
cd "$(dirname "$0")/.."

install_missing=0
private_node_ok=0
for arg in "$@"; do
  case "$arg" in
    --install-broker) install_missing=1 ;;
    --private-node-ok) private_node_ok=1 ;;
    *) printf '[setup] unknown option %s (known: --install-broker, --private-node-ok)\n' "$arg" >&2; exit 2 ;;
  esac
done

say() { printf '[setup] %s\n' "$*" >&2; }

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    return 1
  fi
  if [ -z "${_APT_UPDATED:-}" ]; then apt-get update -qq >/dev/null; _APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# 1. Python environment
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null; then
  say "$PY is missing: sojourn needs Python 3.10 or later. Install it with: sudo apt-get install -y python3 python3-venv"
  exit 3
fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  say "$("$PY" --version 2>&1) is too old: sojourn needs Python 3.10 or later (PYTHON=python3.11 scripts/setup.sh picks another)"
  exit 3
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then  # Debian and Ubuntu ship venv apart
    if [ "$install_missing" = 1 ] && apt_install python3-venv; then
      say "installed python3-venv"
    else
      say "$PY can not make a virtualenv. Install it with: sudo apt-get install -y python3-venv"
      exit 3
    fi
  fi
  say "creating .venv"
  "$PY" -m venv .venv
fi
say "installing sojourn and its dependencies into .venv (first time takes a few minutes: PySpark is large)"
# (pip's and setuptools' chatter about local index locations and editable installs is filtered out)
quiet() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  printf '%s\n' "$out" | grep -vE "Location 'file:|^\s*$|BuildBackendWarning|Editable installation|take precedence|^\s*!!|\*{8}|Please be careful|name as your package|wheel_obj" >&2 || true
  return $rc
}
quiet .venv/bin/python -m pip install -q --upgrade pip
quiet .venv/bin/python -m pip install -q -e ".[analysis,dev,bench]"

# 2. Java for PySpark
if ! command -v java >/dev/null; then
  if [ "$install_missing" = 1 ] && apt_install openjdk-17-jre-headless; then
    say "installed Java 17"
  else
    say "Java is missing: PySpark needs it. Install it with: apt-get install -y openjdk-17-jre-headless"
    exit 3
  fi
fi

# 3. RabbitMQ on 127.0.0.1:5672 (or wherever SOJOURN_AMQP_URL points: then we leave it alone)
broker_up() { .venv/bin/python - <<'PY'
import socket, sys
try:
    socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
except OSError:
    sys.exit(1)
PY
}
if [ -n "${SOJOURN_AMQP_URL:-}" ]; then
  say "SOJOURN_AMQP_URL is set: using that broker"
elif broker_up; then
  say "RabbitMQ is answering on 127.0.0.1:5672"
else
  if ! command -v rabbitmq-server >/dev/null && [ ! -x /usr/sbin/rabbitmq-server ]; then
    if [ "$install_missing" = 1 ] && apt_install rabbitmq-server; then
      say "installed RabbitMQ"
    else
      say "RabbitMQ is not installed. Install it with: sudo apt-get install -y rabbitmq-server"
      say "(or point sojourn at a broker: export SOJOURN_AMQP_URL=amqp://user:pass@host:5672/)"
      exit 3
    fi
  fi
  say "starting RabbitMQ (rabbitmq-server -detached)"
  PATH="$PATH:/usr/sbin" rabbitmq-server -detached >/dev/null 2>&1 || true
  for _ in $(seq 1 90); do
    broker_up && break
    sleep 1
  done
  if broker_up; then
    PATH="$PATH:/usr/sbin" rabbitmqctl await_startup >/dev/null 2>&1 || true
    say "RabbitMQ is up"
  elif [ "$private_node_ok" = 1 ]; then
    say "RabbitMQ did not come up on 127.0.0.1:5672 within 90 s (see /var/log/rabbitmq/):"
    say "sojourn run will start a private node of its own on 127.0.0.1:5673 for the run"
  else
    say "RabbitMQ did not come up on 127.0.0.1:5672 within 90 s; see /var/log/rabbitmq/"
    exit 3
  fi
fi

# 4. Headless Chromium for tests/integration/test_browser.py (skipped where it is absent)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if [ "$install_missing" = 1 ] && apt_install chromium; then
    say "installed Chromium (the browser test opens report.html in it, headless)"
  else
    say "Chromium is not installed: tests/integration/test_browser.py will be skipped"
    say "(install it with: sudo apt-get install -y chromium)"
  fi
fi

# 5. Prometheus for tests/integration/test_live_metrics.py (skipped where it is absent); the test starts
#    its own server on loopback, so the package's service, if the system starts it, is not used.
if ! command -v prometheus >/dev/null; then
  if [ "$install_missing" = 1 ] && apt_install prometheus; then
    say "installed Prometheus (the live-metrics test scrapes a run with a server of its own)"
  else
    say "Prometheus is not installed: tests/integration/test_live_metrics.py will be skipped"
    say "(install it with: sudo apt-get install -y prometheus)"
  fi
fi
