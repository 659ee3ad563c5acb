#!/usr/bin/env bash
# Builds the test kit's own small image for real-node tests: Debian's static busybox (sh, httpd,
# wget, nslookup, ...) in a FROM scratch image, with buildah (vfs storage, chroot isolation),
# archived as an OCI archive under the cache keyed by TESTBOX_VERSION (tools/versions.env).
# Prints the archive's path on stdout. No registry is contacted.
#
#   KUBENEST_CACHE   cache root (default: $XDG_CACHE_HOME/kubenest or ~/.cache/kubenest)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenest}
image=localhost/kubenest/testbox:$TESTBOX_VERSION
archive=$cache/images/testbox-$TESTBOX_VERSION.oci.tar

# Tests of one binary ask for the image at once: one builds it, the others wait for it.
mkdir -p "$(dirname "$archive")"
exec 9>"$archive.lock"
flock 9

if [[ ! -e $archive ]]; then
  start=$SECONDS
  echo "[build-testbox] $image: building..." >&2
  export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
  work=$(mktemp -d)
  ctr=""
  cleanup() {
    [[ -z $ctr ]] || buildah rm "$ctr" >/dev/null 2>&1 || true
    rm -rf "$work"
  }
  trap cleanup EXIT
  mkdir -p "$work/root/bin" "$work/root/tmp"
  chmod 1777 "$work/root/tmp"
  cp /bin/busybox "$work/root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ $applet == busybox ]] || ln -s busybox "$work/root/bin/$applet"
  done
  ctr=$(buildah from scratch)
  buildah copy "$ctr" "$work/root" / >/dev/null
  buildah config --env PATH=/bin --entrypoint '[]' --cmd '["/bin/sh"]' --user 65534:65534 "$ctr"
  buildah commit --quiet "$ctr" "$image" >/dev/null
  mkdir -p "$(dirname "$archive")"
  rm -f "$archive.tmp"
  buildah push --quiet "$image" "oci-archive:$archive.tmp:$image"
  mv "$archive.tmp" "$archive"
  echo "[build-testbox] $image: built in $((SECONDS - start))s ($(du -h "$archive" | cut -f1))" >&2
fi
echo "$archive"
