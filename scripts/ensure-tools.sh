#!/bin/sh
# Installs the command-line tools the deployment tests run (test/*/deploy): promtool (Debian's
# `prometheus` package) checks and unit-tests the alerting rules, docker-compose (Debian's
# `docker-compose`) validates docker-compose.yml without a Docker engine.
# Idempotent: does nothing when both are on PATH. Never fails the setup: without apt (or
# without root and sudo) it says what is missing, and the deployment tests then fail naming it.
set -u

missing=""
command -v promtool >/dev/null 2>&1 || missing="$missing prometheus"
command -v docker-compose >/dev/null 2>&1 || missing="$missing docker-compose"
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "! apt-get not found: install$missing yourself (promtool and docker-compose are needed by the deployment tests)" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root="sudo"
else
  echo "! not root and no password-less sudo: install$missing yourself (needed by the deployment tests)" >&2
  exit 0
fi

echo "▸ installing$missing from Debian's packages (deployment tests: promtool, docker-compose)" >&2
# A package's maintainer script must not start a Prometheus server on :9090 (or any daemon):
# policy-rc.d answering 101 forbids service starts; keep an existing one untouched.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $as_root tee "$policy" >/dev/null && $as_root chmod 755 "$policy" && added_policy=1
fi
# shellcheck disable=SC2086 # $missing is a list of package names
if $as_root apt-get update -qq >/dev/null 2>&1 &&
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1; then
  :
else
  echo "! apt-get could not install$missing: the deployment tests will fail until it is installed" >&2
fi
[ "$added_policy" = 1 ] && $as_root rm -f "$policy"
# Where systemd does run, the unit may have been enabled: stop a server that the package started.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  $as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
exit 0
