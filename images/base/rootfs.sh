#!/usr/bin/env bash
# Makes the shared base of every kubenest image: a minimal Debian root (debootstrap
# --variant=minbase) of the machine's own Debian release, from the machine's own apt sources,
# slimmed like Debian's -slim images, with the non-root user the program images run as.
#
#   images/base/rootfs.sh OUT.tar
#
# The mirror is read from the machine's apt configuration (`apt-get indextargets`), never
# written here; the image's apt sources name the same suites the machine uses (release, updates,
# security), so a later `apt-get install` in an image gets the same package versions as the
# machine. Needs root (debootstrap) and network access to those sources.
set -euo pipefail

out=${1:?usage: rootfs.sh OUT.tar}
# shellcheck source=/dev/null
. /etc/os-release
codename=${VERSION_CODENAME:?/etc/os-release names no codename}

# "release identifier uri" of every package index the machine uses.
targets=$(apt-get indextargets --format '$(RELEASE) $(IDENTIFIER) $(REPO_URI)' | sort -u)
mirror=$(awk -v s="$codename" '$1 == s && $2 == "Packages" {print $3; exit}' <<<"$targets")
[[ -n $mirror ]] || {
  echo "rootfs.sh: the machine's apt sources hold no '$codename' suite (run apt-get update)" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
debootstrap --variant=minbase --include=ca-certificates "$codename" "$root" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log" >&2
  exit 1
}

# The machine's suites of this release, main component only.
awk -v s="$codename" '$2 == "Packages" && ($1 == s || $1 == s "-updates" || $1 == s "-security") {
  print "deb " $3 " " $1 " main" }' <<<"$targets" >"$root/etc/apt/sources.list"

# Like Debian's -slim images: no documentation, manual pages or translations, now or in a
# later install, and no package caches.
cat >"$root/etc/dpkg/dpkg.cfg.d/kubenest-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
cat >"$root/etc/apt/apt.conf.d/kubenest-slim" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,info,lintian}/* "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
rm -rf "$root"/var/log/* "$root"/var/cache/debconf/*-old "$root"/tmp/*

# The user every program image runs as (numeric in the Containerfiles, so it also works on a
# base without this entry).
echo 'nonroot:x:65532:65532:kubenest:/home/nonroot:/usr/sbin/nologin' >>"$root/etc/passwd"
echo 'nonroot:x:65532:' >>"$root/etc/group"
echo 'nonroot:!:19000::::::' >>"$root/etc/shadow"
install -d -m 0755 -o 65532 -g 65532 "$root/home/nonroot"

tar --numeric-owner --xattrs -C "$root" -cf "$out.tmp" .
mv "$out.tmp" "$out"
