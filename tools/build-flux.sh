#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller (a real GitOps engine for the tests
# of objects kept in Git) from the Go module proxy into a cache outside the clone, with their
# CRDs beside them. Skips what is already there; prints how long each step took.
#
# Flux v1.9.6 is the newest release whose dependencies the module proxy here serves whole
# (v1.10.1 needs 15 module versions it refuses); it needs Go 1.27, which the go command fetches
# as the toolchain go1.27.3 for this build only (GOTOOLCHAIN, set here and nowhere else).
# The modules' own go.mod files replace their `api` submodules with local folders, so `go
# install module@version` refuses them: each is copied out of the module cache with its `api`
# module beside it and built there. source-controller asks for github.com/fluxcd/pkg/artifact
# v0.18.3, which the proxy refuses; v0.18.0 (served, the same API) replaces it.
#
#   KUBENEST_CACHE   cache root (default: $XDG_CACHE_HOME/kubenest or ~/.cache/kubenest)
#
# With --print-env it only prints where the binaries are, as KEY=VALUE lines.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenest}
dir=$cache/flux/$FLUX_VERSION

if [[ ${1:-} == --print-env ]]; then
  echo "KUBENEST_FLUX_DIR=$dir"
  exit 0
fi

export GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOCACHE=${GOCACHE:-$cache/go-build}

build() {
  local name=$1
  if [[ -x $dir/$name && -d $dir/crds ]] && ls "$dir/crds/" | grep -q "${2}"; then
    echo "[build-flux] $name: cached ($dir/$name)" >&2
    return
  fi
  local start=$SECONDS
  echo "[build-flux] $name $FLUX_VERSION: building..." >&2
  local module=github.com/fluxcd/$name
  local src api work
  src=$(go mod download -json "$module@$FLUX_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  api=$(go mod download -json "$module/api@$FLUX_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  work=$(mktemp -d)
  cp -r "$src/." "$work"
  rm -rf "$work/api"
  cp -r "$api" "$work/api"
  chmod -R u+w "$work"
  if [[ $name == source-controller ]]; then
    (cd "$work" && go mod edit -replace github.com/fluxcd/pkg/artifact=github.com/fluxcd/pkg/artifact@v0.18.0)
  fi
  mkdir -p "$dir/crds"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$dir/$name.tmp" .)
  cp "$work"/config/crd/bases/*.yaml "$dir/crds/"
  mv "$dir/$name.tmp" "$dir/$name"
  rm -rf "$work"
  echo "[build-flux] $name: built in $((SECONDS - start))s" >&2
}

build source-controller gitrepositories
build kustomize-controller kustomizations

# As build-k8s-bins.sh: the binaries are what is kept; the build cache is gigabytes.
if [[ -z ${KUBENEST_KEEP_GOCACHE:-} && -d $GOCACHE ]]; then
  echo "[build-flux] dropping the Go build cache ($GOCACHE); set KUBENEST_KEEP_GOCACHE=1 to keep it" >&2
  rm -rf "$GOCACHE"
fi
