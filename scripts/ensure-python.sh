#!/bin/sh
# Installs what the Python SDK (sdks/python) needs, from Debian's packages (no PyPI is reachable):
# python3-websockets and python3-httpx at run time; python3-pytest, python3-pytest-asyncio and
# python3-setuptools to test and build it; python3-confluent-kafka for the Kafka producer example
# of docs/protocol.md, which the Python tests run. They are installed for Debian's own python3
# (/usr/bin/python3), the interpreter scripts/test.sh runs the Python tests with.
# Idempotent: does nothing when that python3 imports them all. Never fails the setup
# (scripts/apt-install.sh).
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3

missing=""
[ -x "$PY" ] || missing=" python3"
for pair in websockets:python3-websockets httpx:python3-httpx pytest:python3-pytest pytest_asyncio:python3-pytest-asyncio \
  setuptools:python3-setuptools confluent_kafka:python3-confluent-kafka; do
  module=${pair%%:*}
  [ -x "$PY" ] && "$PY" -c "import $module" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
done
# shellcheck disable=SC2086 # $missing is a list of package names
sh scripts/apt-install.sh "the Python SDK and its tests" $missing
