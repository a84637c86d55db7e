#!/usr/bin/env bash
# One command from a fresh clone to a report: set up, then run the quickstart scenario end to end.
#   scripts/demo.sh [extra `sojourn run` arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/sojourn run scenarios/quickstart.yaml "$@"
