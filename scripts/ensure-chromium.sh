#!/bin/sh
# Debian's Chromium for the web console's browser tests (test/e2e/console.test.ts drives it
# with playwright-core). Installed only when missing; playwright's own browser download is not
# used (the machines reach Debian's packages, not a browser CDN).
set -eu
CHROMIUM=${CHROMIUM_PATH:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "! $CHROMIUM is missing and there is no apt-get: install Chromium to run the console's browser tests" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "! $CHROMIUM is missing: run 'apt-get install -y chromium' as root for the console's browser tests" >&2
  exit 0
fi
echo "▸ installing Debian's chromium (once) for the console's browser tests" >&2
# Another apt run (a parallel setup) may hold the lock for a while: wait for it.
apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium fonts-liberation >&2
