#!/bin/sh
# Installs the command-line tools the deployment tests run (test/*/deploy): promtool (Debian's
# `prometheus` package) checks and unit-tests the alerting rules, docker-compose (Debian's
# `docker-compose`) validates docker-compose.yml without a Docker engine, and openssl makes the
# throwaway CA of the transport-security tests (docs/transport-security.md).
# Idempotent: does nothing when all are on PATH. Never fails the setup (scripts/apt-install.sh).
set -u
cd "$(dirname "$0")/.."

missing=""
command -v promtool >/dev/null 2>&1 || missing="$missing prometheus"
command -v docker-compose >/dev/null 2>&1 || missing="$missing docker-compose"
command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
[ -z "$missing" ] && exit 0

# shellcheck disable=SC2086 # $missing is a list of package names
sh scripts/apt-install.sh "the deployment tests (promtool, docker-compose) and the TLS tests (openssl)" $missing
# Where systemd does run, the unit may have been enabled: stop a server that the package started.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then systemctl disable --now prometheus >/dev/null 2>&1 || true; else sudo -n systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
fi
exit 0
