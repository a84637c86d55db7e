#!/usr/bin/env bash
# One command from a fresh clone to a report: set up, then run the quickstart scenario end to end.
#   scripts/demo.sh [--install] [extra `sojourn run` arguments]
#   --install: as root, also apt-get install what is missing (python3-venv, Java 17, RabbitMQ)
set -euo pipefail
cd "$(dirname "$0")/.."
setup_args=(--private-node-ok)
if [ "${1:-}" = "--install" ]; then
  if [ "$(id -u)" != 0 ]; then
    printf '[demo] --install installs packages with apt-get: run it as root (sudo scripts/demo.sh --install)\n' >&2
    exit 2
  fi
  setup_args+=(--install-broker)
  shift
fi
scripts/setup.sh "${setup_args[@]}"
exec .venv/bin/sojourn run scenarios/quickstart.yaml "$@"
