#!/usr/bin/env bash
# Installs everything the tests and `make dev` need on a fresh Debian machine, and caches it:
# Debian packages (PostgreSQL server, git, Chromium for the console's browser test), the
# Go-built upstream Kubernetes binaries (and the real node's kubelet, kube-proxy, CoreDNS and pod
# sandbox image), schemathesis (the API's property-based test) in a
# virtualenv, and the console's npm packages.
# Safe to run again: each step is skipped when its result is already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

need_pkgs=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need_pkgs+=(postgresql)
# The images (tools/build-images.sh): buildah, debootstrap for their Debian base; and the
# redis-server the demo app's test runs.
command -v buildah >/dev/null || need_pkgs+=(buildah)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
command -v git >/dev/null || need_pkgs+=(git)
command -v chromium >/dev/null || need_pkgs+=(chromium)
command -v npm >/dev/null || need_pkgs+=(nodejs npm)
# `make test` runs the test binaries in lanes (tools/test.py).
command -v python3 >/dev/null || need_pkgs+=(python3)
# The real node (tests/testkit/src/node): container runtime, CNI plugins, kube-proxy's nftables,
# the CNI plugins' and the cleanup's iptables, conntrack, buildah for the pod sandbox image, gcc for its static program.
command -v containerd >/dev/null || need_pkgs+=(containerd)
command -v runc >/dev/null || need_pkgs+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need_pkgs+=(containernetworking-plugins)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v nft >/dev/null || need_pkgs+=(nftables)
command -v conntrack >/dev/null || need_pkgs+=(conntrack)
command -v buildah >/dev/null || need_pkgs+=(buildah)
[[ -x /bin/busybox ]] && /bin/busybox --list >/dev/null 2>&1 || need_pkgs+=(busybox-static)
command -v gcc >/dev/null || need_pkgs+=(gcc libc6-dev)
# Builds from Git (agent/src/build.rs): the distribution registry they push to and the nodes
# pull from, htpasswd for its accounts, skopeo to put base images into it.
command -v docker-registry >/dev/null || need_pkgs+=(docker-registry)
command -v htpasswd >/dev/null || need_pkgs+=(apache2-utils)
command -v skopeo >/dev/null || need_pkgs+=(skopeo)
# ... and OpenSSH's server, the test kit's Git over ssh (tests/testkit/src/git.rs).
[[ -x /usr/sbin/sshd ]] || need_pkgs+=(openssh-server)
# The platform bundle (tools/bundle.sh) packs with zstd.
command -v zstd >/dev/null || need_pkgs+=(zstd)
# The hub benchmark's peer (make test runs every benchmark at a tiny size).
command -v nats-server >/dev/null || need_pkgs+=(nats-server)
if ((${#need_pkgs[@]})); then
  start=$SECONDS
  echo "[setup] installing Debian packages: ${need_pkgs[*]}" >&2
  sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >&2
  echo "[setup] Debian packages installed in $((SECONDS - start))s" >&2
fi

"$here/build-k8s-bins.sh"
"$here/build-flux.sh"
"$here/build-pause.sh"
# The busybox image of real-node tests and of the node's storage helper pods (cached).
"$here/build-testbox.sh" >/dev/null
"$here/install-schemathesis.sh"
"$here/install-console.sh"
