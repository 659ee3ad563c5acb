#!/usr/bin/env bash
# Publishes a kubenest release to an OCI registry: every image (tools/build-images.sh's OCI
# archives, copied by skopeo) and both charts (packaged at the workspace's version and pushed by
# `helm push` as OCI artifacts). The published charts name what was pushed beside them: their
# images' repositories are the registry's, and the control plane's `apiserver.agentChart` is
# the published agent chart, so the install command the API prints pulls from the same place.
#
#   make release REGISTRY=host:port [IMAGES="agent hub ..."]
#   tools/release.sh host:port [IMAGE...]      (default: every image)
#
# Lands as
#   host:port/<path>/<image>:<version>                     images (apiserver, controllers, ...)
#   oci://host:port/<path>/charts/kubenest:<version>       the control plane chart
#   oci://host:port/<path>/charts/kubenest-agent:<version> the agent chart
#
#   KUBENEST_RELEASE_PATH           <path> (default: kubenest)
#   KUBENEST_REGISTRY_USER          the registry account, with
#   KUBENEST_REGISTRY_PASSWORD_FILE a file holding its password (read here, never put on a
#                                   command line; `-` reads it from standard input)
#   KUBENEST_REGISTRY_CA            PEM of the CA of a registry with a private certificate
#   KUBENEST_RELEASE_PREBUILT       1: push the archives as `make images` left them (no build)
#   KUBENEST_IMAGE_PROFILE          cargo profile of the programs (default here: release)
#   KUBENEST_CACHE                  cache root (default: ~/.cache/kubenest)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenest}
log() { echo "[release] $*" >&2; }
die() {
  echo "release.sh: $*" >&2
  exit 2
}

registry=${1:-}
[[ -n $registry ]] || die "usage: tools/release.sh HOST:PORT [IMAGE...] (make release REGISTRY=host:port)"
shift
# Both go into image names and chart references: refuse anything else before using them.
[[ $registry =~ ^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$ ]] ||
  die "REGISTRY '$registry' is not host or host:port"
path=${KUBENEST_RELEASE_PATH:-kubenest}
[[ $path =~ ^[a-z0-9]+([._/-][a-z0-9]+)*$ ]] ||
  die "KUBENEST_RELEASE_PATH '$path' is not a registry path (lowercase, / between parts)"
images=("$@")
((${#images[@]})) || images=(apiserver controllers hub agent builder demo postgres redis kafka)
for name in "${images[@]}"; do
  [[ $name =~ ^(apiserver|controllers|hub|agent|builder|demo|postgres|redis|kafka)$ ]] ||
    die "no image named '$name'"
done

helm=${KUBENEST_HELM:-$cache/helm/$HELM_VERSION/helm}
[[ -x $helm ]] || helm=$(command -v helm) || die "helm is missing: run tools/setup.sh"
command -v skopeo >/dev/null || die "skopeo is missing: run tools/setup.sh"
version=$(awk -F'"' '/^\[workspace.package\]/ {w = 1} w && /^version *=/ {print $2; exit}' \
  "$repo/Cargo.toml")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"

# The account, as a Docker config both skopeo (--authfile) and helm (--registry-config) read.
# The password goes from its file into this one (mode 600) through shell builtins only.
skopeo_auth=()
helm_auth=()
if [[ -n ${KUBENEST_REGISTRY_USER:-} ]]; then
  [[ -n ${KUBENEST_REGISTRY_PASSWORD_FILE:-} ]] ||
    die "KUBENEST_REGISTRY_USER needs KUBENEST_REGISTRY_PASSWORD_FILE (a file, or - for stdin)"
  if [[ $KUBENEST_REGISTRY_PASSWORD_FILE == - ]]; then
    IFS= read -r password || [[ -n $password ]] || die "no password on standard input"
  else
    IFS= read -r password <"$KUBENEST_REGISTRY_PASSWORD_FILE" || [[ -n ${password:-} ]] ||
      die "KUBENEST_REGISTRY_PASSWORD_FILE is empty"
  fi
  [[ $KUBENEST_REGISTRY_USER =~ ^[A-Za-z0-9._@-]+$ ]] ||
    die "KUBENEST_REGISTRY_USER holds characters a registry account does not"
  auth=$(printf '%s:%s' "$KUBENEST_REGISTRY_USER" "$password" | base64 -w0)
  unset password
  (
    umask 077
    printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$registry" "$auth" >"$work/auth.json"
  )
  unset auth
  skopeo_auth=(--dest-authfile "$work/auth.json")
  helm_auth=(--registry-config "$work/auth.json")
fi
skopeo_tls=()
helm_tls=()
if [[ -n ${KUBENEST_REGISTRY_CA:-} ]]; then
  [[ -r $KUBENEST_REGISTRY_CA ]] || die "KUBENEST_REGISTRY_CA $KUBENEST_REGISTRY_CA cannot be read"
  # skopeo reads the CAs of a folder (*.crt).
  mkdir "$work/certs"
  cp "$KUBENEST_REGISTRY_CA" "$work/certs/ca.crt"
  skopeo_tls=(--dest-cert-dir "$work/certs")
  helm_tls=(--ca-file "$KUBENEST_REGISTRY_CA")
fi

# The images, built (or found unchanged) at the release profile unless told they are ready.
if [[ ${KUBENEST_RELEASE_PREBUILT:-} != 1 ]]; then
  KUBENEST_IMAGE_PROFILE=${KUBENEST_IMAGE_PROFILE:-release} "$here/build-images.sh" "${images[@]}"
fi
for name in "${images[@]}"; do
  archive=$cache/images/$name-$version.oci.tar
  [[ -f $archive ]] || die "no archive $archive: run make images (or drop KUBENEST_RELEASE_PREBUILT)"
  target=$registry/$path/$name:$version
  log "image $target"
  skopeo copy --quiet "${skopeo_auth[@]}" "${skopeo_tls[@]}" \
    "oci-archive:$archive" "docker://$target"
done

# The charts, naming what was pushed: each values.yaml line this changes must be found, or the
# published chart would still point at the build machine's localhost/kubenest images.
rewrite() {
  local file=$1 from=$2 to=$3
  grep -qF -- "$from" "$file" || die "$file has no '$from' to point at the registry"
  local text
  text=$(<"$file")
  printf '%s\n' "${text//"$from"/"$to"}" >"$file"
}
cp -r "$repo/charts/kubenest" "$repo/charts/kubenest-agent" "$work/"
charts=oci://$registry/$path/charts
rewrite "$work/kubenest/values.yaml" "repository: localhost/kubenest/" "repository: $registry/$path/"
rewrite "$work/kubenest/values.yaml" 'agentChart: ""' \
  "agentChart: $charts/kubenest-agent"
rewrite "$work/kubenest-agent/values.yaml" "repository: localhost/kubenest/" \
  "repository: $registry/$path/"
for chart in kubenest kubenest-agent; do
  # The values each chart refuses to render without, as placeholders.
  case $chart in
    kubenest) required=(postgres.existingSecret=p keys.existingSecret=k hub.insecurePlaintext=true
      hub.publicUrl=wss://hub.invalid/v1/connect apiserver.admin.existingSecret=a) ;;
    kubenest-agent) required=(hub.url=wss://hub.invalid/v1/connect token=a.b.c) ;;
  esac
  "$helm" lint --strict "$work/$chart" "${required[@]/#/--set=}" >"$work/lint.log" 2>&1 || {
    cat "$work/lint.log" >&2
    die "$chart does not lint"
  }
  "$helm" package "$work/$chart" --version "$version" --app-version "$version" \
    --destination "$work" >/dev/null
  log "chart $charts/$chart:$version"
  "$helm" push "$work/$chart-$version.tgz" "$charts" "${helm_auth[@]}" "${helm_tls[@]}" >/dev/null
done

cat <<EOF
kubenest $version is published at $registry:
  helm install kubenest $charts/kubenest --version $version --namespace kubenest --create-namespace --values ...
  (the control plane prints each cluster's agent install command, from $charts/kubenest-agent)
EOF
