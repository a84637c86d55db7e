#!/usr/bin/env bash
# One command from a fresh clone to a test run: set up, then run the whole suite
# (unit tests, Spark tests on tiny frames, integration tests against the real RabbitMQ).
#   scripts/test.sh [--install-broker] [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
setup_args=()
if [ "${1:-}" = "--install-broker" ]; then setup_args=(--install-broker); shift; fi
scripts/setup.sh "${setup_args[@]}"
# The house rules first (seconds): lint, format and types, as configured in pyproject.toml.
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .
.venv/bin/mypy
exec .venv/bin/python -m pytest -q "$@"
