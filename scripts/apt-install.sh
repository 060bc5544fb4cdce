#!/bin/sh
# Installs Debian packages for the setup: `sh scripts/apt-install.sh "<what needs them>" pkg…`.
# Never fails the setup: without apt-get (or without root and password-less sudo), or when
# apt-get fails, it says what is missing and for what, and the tests that need it then fail
# naming it. No package's maintainer script may start a daemon meanwhile (policy-rc.d answering
# 101 forbids service starts; an existing policy is kept untouched). Another apt run (a
# parallel setup) may hold the lock for a while: it is waited for.
set -u
purpose=$1
shift
packages="$*"
[ -z "$packages" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "! apt-get not found: install $packages yourself ($purpose)" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root="sudo"
else
  echo "! not root and no password-less sudo: install $packages yourself ($purpose)" >&2
  exit 0
fi

echo "▸ installing $packages from Debian's packages ($purpose)" >&2
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $as_root tee "$policy" >/dev/null && $as_root chmod 755 "$policy" && added_policy=1
fi
# shellcheck disable=SC2086 # $packages is a list of package names
if $as_root apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null 2>&1 &&
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends $packages >/dev/null 2>&1; then
  :
else
  echo "! apt-get could not install $packages: $purpose will fail until it is installed" >&2
fi
[ "$added_policy" = 1 ] && $as_root rm -f "$policy"
exit 0
