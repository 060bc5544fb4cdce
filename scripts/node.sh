#!/bin/sh
# Runs the project's Node.js (24 LTS; scripts/ensure-node.sh installs it when the machine's is older).
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(sh "$root/scripts/ensure-node.sh")"
exec "$bin/node" "$@"
