#!/usr/bin/env bash
# Installs schemathesis (from PyPI, the version in versions.env) into a virtualenv under the cache,
# for the API's property-based test. Skipped when that version is already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-$HOME/.cache/kubenest}
venv=$cache/schemathesis/$SCHEMATHESIS_VERSION
if [[ -e $venv/.complete ]]; then
  echo "[setup] schemathesis $SCHEMATHESIS_VERSION: cached ($venv)" >&2
  exit 0
fi
start=$SECONDS
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3 python3-venv >&2
fi
# A virtualenv records its own path, so it is built where it lives; the marker says it is whole.
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION" >&2
touch "$venv/.complete"
echo "[setup] schemathesis $SCHEMATHESIS_VERSION installed in $((SECONDS - start))s" >&2
