#!/bin/sh
# The README's test command: lint, then every test (unit + integration + end-to-end) against
# the real local stack. Uses a running stack (`reach up` in another terminal) or starts one in
# the background and stops it afterwards.
set -eu
cd "$(dirname "$0")/.."
# Node.js 24 LTS (scripts/ensure-node.sh): vitest, the CLI and the stack it starts run on it.
PATH="$(sh scripts/ensure-node.sh):$PATH"; export PATH
if ! command -v pnpm >/dev/null 2>&1; then PATH="$PWD/.reach/tools/node_modules/.bin:$PATH"; export PATH; fi
reach() { node packages/cli/dist/bin.js "$@"; }

started=0
if reach ps >/dev/null 2>&1; then
  echo "▸ using the running local stack" >&2
else
  reach up --detach
  started=1
fi
cleanup() { if [ "$started" = 1 ]; then reach down; fi; }
trap cleanup EXIT INT TERM

# each phase's start time, so a slow CI run shows where its minutes went
phase() { echo "▸ $(date -u +%H:%M:%S) $*" >&2; }
phase lint
pnpm run lint
if [ "$#" -gt 0 ]; then
  pnpm exec vitest run "$@"
else
  phase "unit + integration tests"
  pnpm exec vitest run --project unit --project integration
  # the Python SDK (sdks/python) against the same stack, with Debian's python3 and packages
  phase "Python SDK tests"
  (cd sdks/python && /usr/bin/python3 -m pytest -q)
  # outages last, alone: they stop PostgreSQL/Redis/Kafka for a while
  phase "degradation tests"
  pnpm exec vitest run --project degradation
  # then second stacks beside the default one (a 3-broker cluster with a broker killed, N instances)
  phase "cluster tests"
  pnpm exec vitest run --project cluster
fi
phase done
