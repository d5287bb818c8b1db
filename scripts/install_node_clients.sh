#!/usr/bin/env bash
# The independent RocketMQ 4 remoting client the remoting tests run: ali-ons (pure JavaScript), from npm into
# .cache/node-clients. Idempotent; needs Node and npm (Node 20 is on the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.cache/node-clients
VERSION=3.12.0
if [ -f "$DEST/node_modules/ali-ons/package.json" ] && grep -q "\"version\": \"$VERSION\"" "$DEST/node_modules/ali-ons/package.json"; then
  exit 0
fi
mkdir -p "$DEST"
cd "$DEST"
[ -f package.json ] || echo '{"name": "orbitmq-node-clients", "private": true}' > package.json
npm install --silent --no-audit --no-fund "ali-ons@$VERSION"
