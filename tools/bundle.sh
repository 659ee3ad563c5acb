#!/usr/bin/env bash
# Builds the platform bundle: one versioned archive holding everything a machine needs to become
# part of a kubenest cluster without reaching the internet, with a manifest of checksums.
#
#   make bundle                      (tools/bundle.sh)
#   tools/bundle.sh --verify FILE    checks an archive (or its unpacked folder) against its
#                                    own manifest
#
# Lands as $KUBENEST_BUNDLE_DIR/kubenest-bundle-<version>-<arch>.tar.zst (default dir:
# $KUBENEST_CACHE/bundle), one top folder kubenest-bundle-<version>/ holding
#
#   manifest.json   name, version, arch, the versions of what is inside, and every file with
#                   its size, sha256 and kind
#   SHA256SUMS      the same checksums, for `sha256sum -c`
#   bin/            kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy
#                   kubectl (built from source as the tests' are), etcd, coredns,
#                   local-path-provisioner (the storage provisioner), helm
#   debs/           containerd, runc, the CNI plugins and what they need that a Debian install
#                   of priority `important` and up does not already have (iptables, conntrack,
#                   ...), as Debian's own packages for this machine's release
#   images/         every kubenest image and the pod sandbox image, as OCI archives
#                   (`ctr -n k8s.io images import`): localhost/kubenest/<name>:<version>
#   charts/         the control plane chart and the agent chart, packaged at the version
#
# Zstandard because the binaries are most of the size and it packs them fast on two cores; the
# installer unpacks on the machine it runs on and pushes files, so machines need no zstd.
#
#   KUBENEST_CACHE            cache root (default: ~/.cache/kubenest)
#   KUBENEST_BUNDLE_DIR       where the archive goes (default: $KUBENEST_CACHE/bundle)
#   KUBENEST_IMAGE_PROFILE    cargo profile of the images' programs (default here: release)
#   KUBENEST_BUNDLE_PREBUILT  1: take the images as `make images` left them (no build)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenest}
log() { echo "[bundle] $*" >&2; }
die() {
  echo "bundle.sh: $*" >&2
  exit 2
}

# Checks an archive (or the folder it unpacks to): every file its manifest names is there
# with its size and sha256, and nothing else is. Prints the manifest's summary.
verify() {
  local top=$1
  if [[ -f $1 ]]; then
    local dir
    dir=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$dir'" RETURN
    tar --zstd -xf "$1" -C "$dir"
    top=$(find "$dir" -mindepth 1 -maxdepth 1 -type d)
    [[ $(wc -l <<<"$top") == 1 ]] || die "$1 has more than one top folder"
  fi
  [[ -f $top/manifest.json ]] || die "$1 has no manifest.json"
  python3 - "$top" <<'EOF'
import hashlib, json, os, sys
top = sys.argv[1]
manifest = json.load(open(os.path.join(top, "manifest.json")))
named = set()
for entry in manifest["files"]:
    path = os.path.join(top, entry["path"])
    if not os.path.isfile(path):
        sys.exit(f"bundle: {entry['path']} is in the manifest but not in the archive")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != entry["sha256"] or os.path.getsize(path) != entry["size"]:
        sys.exit(f"bundle: {entry['path']} does not match its checksum")
    named.add(entry["path"])
for root, _, files in os.walk(top):
    for name in files:
        rel = os.path.relpath(os.path.join(root, name), top)
        if rel not in named and rel not in ("manifest.json", "SHA256SUMS"):
            sys.exit(f"bundle: {rel} is in the archive but not in the manifest")
kinds = {}
for entry in manifest["files"]:
    kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
print(f"{manifest['name']} {manifest['version']} ({manifest['arch']}): {len(named)} files, "
      + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ": every checksum matches")
EOF
}

if [[ ${1:-} == --verify ]]; then
  [[ -n ${2:-} ]] || die "usage: tools/bundle.sh --verify FILE|DIR"
  verify "$2"
  exit 0
fi
[[ $# == 0 ]] || die "usage: tools/bundle.sh [--verify FILE|DIR]"

for tool in zstd apt-get dpkg-deb python3; do
  command -v "$tool" >/dev/null || die "$tool is missing: run tools/setup.sh"
done
helm=${KUBENEST_HELM:-$cache/helm/$HELM_VERSION/helm}
[[ -x $helm ]] || die "helm is missing: run tools/setup.sh"
version=$(awk -F'"' '/^\[workspace.package\]/ {w = 1} w && /^version *=/ {print $2; exit}' \
  "$repo/Cargo.toml")
arch=$(dpkg --print-architecture)
out_dir=${KUBENEST_BUNDLE_DIR:-$cache/bundle}
archive=$out_dir/kubenest-bundle-$version-$arch.tar.zst
start=$SECONDS

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
top=$work/kubenest-bundle-$version
mkdir -p "$top"/{bin,debs,images,charts}

# The binaries, built and cached as the tests' are (tools/setup.sh builds them); etcd is the
# one the test kit runs (its vendored crate's binary).
"$here/build-k8s-bins.sh" >/dev/null
eval "$("$here/build-k8s-bins.sh" --print-env)"
for name in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  cp "$KUBENEST_K8S_BIN/$name" "$top/bin/"
done
cp "$KUBENEST_COREDNS_BIN" "$KUBENEST_LOCAL_PATH_BIN" "$KUBENEST_HELM_BIN" "$top/bin/"
etcd=$(find "$HOME/.cargo/registry/src" -path '*etcd-bin-vendored-linux-amd64-*/bin/etcd' \
  -type f 2>/dev/null | sort -V | tail -1)
[[ -x ${KUBENEST_ETCD_BIN:-$etcd} ]] || die "no etcd binary: build the workspace's tests once (cargo test --no-run)"
cp "${KUBENEST_ETCD_BIN:-$etcd}" "$top/bin/etcd"
etcd_version=$("$top/bin/etcd" --version | awk '/^etcd Version/ {print $3}')

# Debian's packages for the runtime, with what they need beyond a Debian install's
# required and important packages (which every machine has), cached by name and version.
debs=$cache/debs/$arch
mkdir -p "$debs"
wanted=(containerd runc containernetworking-plugins iptables conntrack nftables)
closure() {
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${wanted[@]}" | grep -E '^[a-z0-9]' | grep -v '^<' | sort -u
}
packages=$(closure 2>/dev/null) || true
if [[ -z $packages ]] || ! apt-cache show containerd >/dev/null 2>&1; then
  log "refreshing Debian's package lists"
  apt-get update -qq
  packages=$(closure)
fi
# What every Debian install has: the packages of priority required or important (and the
# essential ones), with everything they depend on. Left out, unless asked for by name.
base=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances $(apt-cache dumpavail | awk '/^Package:/ {p = $2}
    /^Priority: (required|important)$/ || /^Essential: yes$/ {print p}' | sort -u) |
  grep -E '^[a-z0-9]' | sed 's/:.*//' | sort -u)
is_base() {
  [[ " ${wanted[*]} " != *" $1 "* ]] && grep -qxF -- "$1" <<<"$base"
}
deb_list=()
for package in $(sed 's/:.*//' <<<"$packages" | sort -u); do
  is_base "$package" && continue
  candidate=$(apt-cache policy "$package" | awk '/Candidate:/ {print $2}')
  [[ -n $candidate && $candidate != "(none)" ]] || continue
  file=$(ls "$debs/${package}_${candidate//:/%3a}_"*.deb 2>/dev/null | head -1 || true)
  if [[ -z $file ]]; then
    (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "$package=$candidate" \
      >/dev/null) || die "apt-get download $package=$candidate failed"
    file=$(ls "$debs/${package}_${candidate//:/%3a}_"*.deb | head -1)
  fi
  cp "$file" "$top/debs/"
  deb_list+=("$package=$candidate")
done
for package in "${wanted[@]}"; do
  ls "$top/debs/${package}_"*.deb >/dev/null 2>&1 || die "no package $package in the bundle"
done

# The images at the bundle's profile (unchanged ones are skipped), and the sandbox image.
images=(apiserver controllers hub agent builder demo postgres redis kafka)
if [[ ${KUBENEST_BUNDLE_PREBUILT:-} != 1 ]]; then
  KUBENEST_IMAGE_PROFILE=${KUBENEST_IMAGE_PROFILE:-release} "$here/build-images.sh" "${images[@]}"
fi
"$here/build-pause.sh" >/dev/null
for name in "${images[@]}"; do
  file=$cache/images/$name-$version.oci.tar
  [[ -f $file ]] || die "no archive $file: run make images (or drop KUBENEST_BUNDLE_PREBUILT)"
  cp "$file" "$top/images/"
done
cp "$cache/images/pause-$PAUSE_VERSION.oci.tar" "$top/images/"

# The charts, as they are in the repository: their images are the bundle's, by name.
# Repacked with fixed times and order, so the same chart is the same file (and an unchanged
# bundle is not packed again, below).
for chart in kubenest kubenest-agent; do
  "$helm" package "$repo/charts/$chart" --version "$version" --app-version "$version" \
    --destination "$work/charts" >/dev/null
  mkdir -p "$work/charts/$chart.x"
  tar -xzf "$work/charts/$chart-$version.tgz" -C "$work/charts/$chart.x"
  tar -C "$work/charts/$chart.x" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -cf - "$chart" | gzip -n >"$top/charts/$chart-$version.tgz"
done

# The manifest and the checksums.
(cd "$top" && find bin debs images charts -type f -print0 | LC_ALL=C sort -z |
  xargs -0 sha256sum >SHA256SUMS)
python3 - "$top" "$version" "$arch" "$K8S_VERSION" "$etcd_version" "$COREDNS_VERSION" \
  "$LOCAL_PATH_VERSION" "$HELM_VERSION" "${deb_list[*]}" <<'EOF'
import json, os, sys
top, version, arch, k8s, etcd, coredns, local_path, helm, debs = sys.argv[1:]
kind = {"bin": "binary", "debs": "deb", "images": "image", "charts": "chart"}
files = []
for line in open(os.path.join(top, "SHA256SUMS")):
    digest, path = line.rstrip("\n").split("  ", 1)
    files.append({"path": path, "kind": kind[path.split("/", 1)[0]], "sha256": digest,
                  "size": os.path.getsize(os.path.join(top, path))})
manifest = {
    "name": "kubenest-bundle", "version": version, "arch": arch,
    "versions": {"kubernetes": k8s, "etcd": etcd, "coredns": coredns,
                 "local-path-provisioner": local_path, "helm": helm,
                 "debs": dict(d.split("=", 1) for d in debs.split())},
    "files": files,
}
with open(os.path.join(top, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
EOF

mkdir -p "$out_dir"
# The same files as the archive already there: it stands (packing is most of the time).
if [[ -f $archive && -f $archive.sums ]] && cmp -s "$archive.sums" <(cat "$top/SHA256SUMS" "$top/manifest.json"); then
  log "$archive: unchanged ($(du -h "$archive" | cut -f1)), checked in $((SECONDS - start))s"
  echo "$archive"
  exit 0
fi
rm -f "$archive.sums"
tar -C "$work" -cf - "kubenest-bundle-$version" | zstd -q -T0 -3 -o "$archive.partial" -f
mv "$archive.partial" "$archive"
cat "$top/SHA256SUMS" "$top/manifest.json" >"$archive.sums"
log "$archive: $(du -h "$archive" | cut -f1) in $((SECONDS - start))s"
echo "$archive"
