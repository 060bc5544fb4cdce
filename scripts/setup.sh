#!/bin/sh
# Makes a fresh checkout runnable: pnpm (pinned), the locked dependencies, a build.
# Idempotent and quick when nothing changed. The Kafka broker is fetched by `reach up`.
set -eu
cd "$(dirname "$0")/.."
PNPM_VERSION=9.15.9

# Node.js 24 LTS first (pinned; installed into .reach/tools/node when the machine's node is older):
# pnpm, the build and everything after run on it.
PATH="$(sh scripts/ensure-node.sh):$PATH"; export PATH

if ! command -v pnpm >/dev/null 2>&1; then
  echo "▸ installing pnpm $PNPM_VERSION" >&2
  if ! npm install -g "pnpm@$PNPM_VERSION" >/dev/null 2>&1; then
    # no permission for a global install: keep pnpm inside the checkout
    npm install --prefix .reach/tools "pnpm@$PNPM_VERSION" >/dev/null
  fi
fi
if ! command -v pnpm >/dev/null 2>&1; then PATH="$PWD/.reach/tools/node_modules/.bin:$PATH"; export PATH; fi

for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || echo "! $tool is not installed: reach up needs Java 17+ and Maven to fetch and run Kafka" >&2
done

# promtool and docker-compose for the deployment tests, openssl for the TLS tests (Debian packages; never fails the setup)
sh scripts/ensure-tools.sh
# the Python SDK's dependencies and test tools (Debian packages; never fails the setup)
sh scripts/ensure-python.sh

sh scripts/ensure-chromium.sh
pnpm install --frozen-lockfile --prefer-offline >&2
pnpm run build >&2
