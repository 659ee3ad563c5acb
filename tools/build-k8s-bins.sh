#!/usr/bin/env bash
# Builds the upstream binaries that tests and `make dev` run, into a cache outside the clone,
# keyed by version. Skips whatever is already there; prints how long each step took.
#
#   KUBENEST_CACHE   cache root (default: $XDG_CACHE_HOME/kubenest or ~/.cache/kubenest)
#
# With --print-env it only prints where the binaries are, as KEY=VALUE lines.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenest}
k8s_dir=$cache/k8s/$K8S_VERSION
kwok_dir=$cache/kwok/$KWOK_VERSION
helm_dir=$cache/helm/$HELM_VERSION
coredns_dir=$cache/coredns/$COREDNS_VERSION
local_path_dir=$cache/local-path/$LOCAL_PATH_VERSION
traefik_dir=$cache/traefik/$TRAEFIK_VERSION
netpol_dir=$cache/kube-network-policies/$KUBE_NETWORK_POLICIES_VERSION
# Named by revision: a change to the stages below must not be hidden by a cached older file.
stages_file=stages-2.yaml

if [[ ${1:-} == --print-env ]]; then
  echo "KUBENEST_K8S_BIN=$k8s_dir"
  echo "KUBENEST_KWOK_BIN=$kwok_dir/kwok"
  echo "KUBENEST_KWOK_STAGES=$kwok_dir/$stages_file"
  echo "KUBENEST_HELM_BIN=$helm_dir/helm"
  echo "KUBENEST_COREDNS_BIN=$coredns_dir/coredns"
  echo "KUBENEST_LOCAL_PATH_BIN=$local_path_dir/local-path-provisioner"
  echo "KUBENEST_TRAEFIK_BIN=$traefik_dir/traefik"
  echo "KUBENEST_NETWORK_POLICIES_BIN=$netpol_dir/kube-network-policies"
  exit 0
fi

export CGO_ENABLED=0
# The Go build cache lives beside the binaries so that CI's fresh clone reuses it.
export GOCACHE=${GOCACHE:-$cache/go-build}
export GOFLAGS=${GOFLAGS:--buildvcs=false}

step() {
  local name=$1 target=$2; shift 2
  if [[ -e $target ]]; then
    echo "[build-k8s-bins] $name: cached ($target)" >&2
    return
  fi
  local start=$SECONDS
  echo "[build-k8s-bins] $name: building..." >&2
  "$@"
  echo "[build-k8s-bins] $name: built in $((SECONDS - start))s" >&2
}

build_k8s() {
  local cmd=$1 out=$2
  local pkg=k8s.io/component-base/version
  local cgo=k8s.io/client-go/pkg/version
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  for p in $pkg $cgo; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$(dirname "$out")"
  (cd "$here/k8s-bins" && go build -trimpath -ldflags "$ld" -o "$out.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$out.tmp" "$out"
}

go_install() {
  local pkg=$1 dir=$2 ld=${3:-}
  mkdir -p "$dir"
  GOBIN=$dir go install -trimpath -ldflags "-s -w $ld" "$pkg"
}

# kwok ships its "fast" simulation stages (nodes Ready, pods Running and Ready, deletions honoured)
# as YAML in its module, not in the binary: gather them into one config file beside it. One
# change: pods whose first container's image is tagged `never-ready` are never made Ready, so
# tests can exercise rollouts that miss their progress deadline (a real kubelet would leave such
# a pod unready too, e.g. when its image cannot be pulled or its readiness probe fails).
kwok_stages() {
  local src
  src=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
  [[ -d $src ]] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
  {
    for f in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
      echo "---"
      if [[ $f == pod/fast/pod-ready ]]; then
        awk '{ print } /^    matchExpressions:$/ && !done {
          print "    - key: '"'"'.spec.containers.[0].image | endswith(\":never-ready\")'"'"'"
          print "      operator: '"'"'NotIn'"'"'"
          print "      values:"
          print "      - '"'"'true'"'"'"
          done = 1 }' "$src/$f.yaml"
      else
        cat "$src/$f.yaml"
      fi
    done
  } >"$kwok_dir/$stages_file.tmp"
  mv "$kwok_dir/$stages_file.tmp" "$kwok_dir/$stages_file"
}

# kubelet and kube-proxy are for the real node (tests/testkit/src/node); same module, same tag.
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
  step "$cmd $K8S_VERSION" "$k8s_dir/$cmd" build_k8s "$cmd" "$k8s_dir/$cmd"
done
step "kwok $KWOK_VERSION" "$kwok_dir/kwok" go_install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "$kwok_dir" \
  "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
step "kwok stages" "$kwok_dir/$stages_file" kwok_stages
step "helm $HELM_VERSION" "$helm_dir/helm" go_install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$helm_dir" \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
# The real node's cluster DNS: CoreDNS runs as a host process with its kubernetes plugin. Its
# module has no replace directives, so `go install` builds it straight from the module proxy.
step "coredns $COREDNS_VERSION" "$coredns_dir/coredns" go_install "github.com/coredns/coredns@$COREDNS_VERSION" \
  "$coredns_dir" "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
# The real node's storage: Rancher's local-path provisioner, a host process too (out of cluster
# with the admin kubeconfig); no replace directives either.
step "local-path-provisioner $LOCAL_PATH_VERSION" "$local_path_dir/local-path-provisioner" go_install \
  "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION" "$local_path_dir"

# The real node's ingress controller: Traefik, a host process too. Its go.mod has replace
# directives (forks of two libraries), which `go install pkg@version` refuses, so it is built as
# the main module from a writable copy of its module source.
build_traefik() {
  local src work
  src=$(go env GOMODCACHE)/github.com/traefik/traefik/v3@$TRAEFIK_VERSION
  [[ -d $src ]] || go mod download "github.com/traefik/traefik/v3@$TRAEFIK_VERSION"
  work=$(mktemp -d)
  cp -r "$src/." "$work"
  chmod -R u+w "$work"
  mkdir -p "$traefik_dir"
  (cd "$work" && go build -trimpath -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION" \
    -o "$traefik_dir/traefik.tmp" ./cmd/traefik)
  rm -rf "$work"
  mv "$traefik_dir/traefik.tmp" "$traefik_dir/traefik"
}
step "traefik $TRAEFIK_VERSION" "$traefik_dir/traefik" build_traefik

# The real node's NetworkPolicy enforcement: kube-network-policies, a host process too. Its main
# package is the module's `cmd` folder, which `go install` would name `cmd`, so it is built as the
# main module from a writable copy of its source, like Traefik. One file of its nftables library
# is replaced (a copy of the library, by a `replace` directive): our kernels lack nftables'
# `queue` expression, so queueing goes through xtables' NFQUEUE target
# (kube-network-policies/queue.go says why and how); every rule and decision stays upstream's.
build_network_policies() {
  local src nftables work
  src=$(go env GOMODCACHE)/sigs.k8s.io/kube-network-policies@$KUBE_NETWORK_POLICIES_VERSION
  [[ -d $src ]] || go mod download "sigs.k8s.io/kube-network-policies@$KUBE_NETWORK_POLICIES_VERSION"
  # The replacement is of one version of the library; a bump must look at it again.
  nftables=$(cd "$src" && go list -m -f '{{.Dir}}' github.com/google/nftables)
  if [[ $nftables != */github.com/google/nftables@v0.3.0 ]]; then
    echo "[build-k8s-bins] kube-network-policies uses $nftables, not nftables v0.3.0:" \
      "review tools/kube-network-policies/queue.go" >&2
    return 1
  fi
  work=$(mktemp -d)
  cp -r "$src/." "$work/kube-network-policies"
  cp -r "$nftables/." "$work/nftables"
  chmod -R u+w "$work"
  cp "$here/kube-network-policies/queue.go" "$work/nftables/expr/queue.go"
  mkdir -p "$netpol_dir"
  (cd "$work/kube-network-policies" &&
    go mod edit -replace github.com/google/nftables=../nftables &&
    go build -trimpath -ldflags "-s -w" -o "$netpol_dir/kube-network-policies.tmp" ./cmd)
  rm -rf "$work"
  mv "$netpol_dir/kube-network-policies.tmp" "$netpol_dir/kube-network-policies"
}
step "kube-network-policies $KUBE_NETWORK_POLICIES_VERSION" "$netpol_dir/kube-network-policies" \
  build_network_policies

# Every binary is cached above; the Go build cache (~5 GB) only speeds up a rebuild after a
# version bump, and on a small CI disk it is what runs out. Dropped once everything is built.
if [[ -z ${KUBENEST_KEEP_GOCACHE:-} && -d $GOCACHE ]]; then
  echo "[build-k8s-bins] dropping the Go build cache ($GOCACHE); set KUBENEST_KEEP_GOCACHE=1 to keep it" >&2
  rm -rf "$GOCACHE"
fi
