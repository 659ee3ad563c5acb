#!/usr/bin/env bash
# The console's npm packages, exactly as package-lock.json pins them (`npm ci`), with npm's
# cache outside the clone. Skipped while node_modules matches the lockfile.
set -euo pipefail
console=$(cd "$(dirname "$0")/../console" && pwd)
cache=${KUBENEST_CACHE:-$HOME/.cache/kubenest}
stamp=$console/node_modules/.kubenest-lock.sha256
want=$(sha256sum "$console/package-lock.json" | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi
start=$SECONDS
echo "[setup] installing the console's npm packages (npm ci)" >&2
(cd "$console" && npm_config_cache=$cache/npm npm ci --no-audit --no-fund --loglevel=error >&2)
echo "$want" >"$stamp"
echo "[setup] console packages installed in $((SECONDS - start))s" >&2
