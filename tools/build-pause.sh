#!/usr/bin/env bash
# Builds the pod sandbox ("pause") image the real node's containerd names as its sandbox_image:
# a static C program (pause/pause.c) in a FROM scratch image, built by buildah without a daemon
# (vfs storage, chroot isolation) and archived as an OCI archive under the cache, keyed by
# PAUSE_VERSION (tools/versions.env: bump it when pause.c changes). No registry is contacted.
#
#   KUBENEST_CACHE   cache root (default: $XDG_CACHE_HOME/kubenest or ~/.cache/kubenest)
#
# With --print-env it only prints where the archive is and the image's name, as KEY=VALUE lines.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenest}
image=localhost/kubenest/pause:$PAUSE_VERSION
archive=$cache/images/pause-$PAUSE_VERSION.oci.tar

if [[ ${1:-} == --print-env ]]; then
  echo "KUBENEST_PAUSE_IMAGE=$image"
  echo "KUBENEST_PAUSE_ARCHIVE=$archive"
  exit 0
fi
if [[ -e $archive ]]; then
  echo "[build-pause] $image: cached ($archive)" >&2
  exit 0
fi

start=$SECONDS
echo "[build-pause] $image: building..." >&2
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
work=$(mktemp -d)
ctr=""
cleanup() {
  [[ -z $ctr ]] || buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

gcc -static -Os -s -Wall -Werror -o "$work/pause" "$here/pause/pause.c"
ctr=$(buildah from scratch)
buildah copy "$ctr" "$work/pause" /pause >/dev/null
buildah config --entrypoint '["/pause"]' --cmd '[]' --user 65535:65535 \
  --label org.opencontainers.image.title=kubenest-pause "$ctr"
buildah commit --quiet "$ctr" "$image" >/dev/null
mkdir -p "$(dirname "$archive")"
rm -f "$archive.tmp"
buildah push --quiet "$image" "oci-archive:$archive.tmp:$image"
mv "$archive.tmp" "$archive"
echo "[build-pause] $image: built in $((SECONDS - start))s ($(du -h "$archive" | cut -f1))" >&2
