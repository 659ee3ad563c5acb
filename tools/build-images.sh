#!/usr/bin/env bash
# Builds kubenest's images without a Docker daemon: buildah with vfs storage and chroot
# isolation, from the Containerfiles under images/, each archived as an OCI archive under
# $KUBENEST_CACHE/images/ that `ctr -n k8s.io images import` loads onto a node. No registry is
# contacted; the base comes from Debian's packages (images/base/rootfs.sh).
#
#   tools/build-images.sh [NAME...]     build these images (default: all), skipping unchanged ones
#   tools/build-images.sh --check [NAME...]  also run each image's programs (--version) when cached
#   tools/build-images.sh --print-env   print where the archives are, as KEY=VALUE lines
#
# Names: apiserver controllers hub agent demo postgres redis kafka builder (and base, the one they
# share). Images are `localhost/kubenest/<name>:<workspace version>`. An image is rebuilt only when
# its inputs change: the files of its build context (its images/<name>/ folder, the stripped
# binary, helm and the addon charts for the agent, Kafka's jars for kafka) and its base.
# Kafka's jars come from Maven (images/kafka/pom.xml at tools/versions.env's KAFKA_VERSION, with
# Debian's maven, installed here when missing), cached under $KUBENEST_CACHE/kafka-libs/.
#
#   KUBENEST_CACHE           cache root (default: ~/.cache/kubenest)
#   CARGO_TARGET_DIR         where cargo builds the programs (default: $KUBENEST_CACHE/cargo-target)
#   KUBENEST_IMAGE_PROFILE   cargo profile of the binaries: debug (default) or release
#   KUBENEST_IMAGE_NO_CARGO  1: take the binaries as they are in CARGO_TARGET_DIR, no cargo build
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KUBENEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenest}
target=${CARGO_TARGET_DIR:-$cache/cargo-target}
profile=${KUBENEST_IMAGE_PROFILE:-debug}
version=$(awk -F'"' '/^\[workspace.package\]/ {w = 1} w && /^version *=/ {print $2; exit}' \
  "$repo/Cargo.toml")
out=$cache/images
all=(apiserver controllers hub agent demo postgres redis kafka builder)

image_of() { echo "localhost/kubenest/$1:$version"; }
archive_of() { echo "$out/$1-$version.oci.tar"; }
# The program (cargo binary) an image carries, if any.
binary_of() {
  case $1 in
    apiserver | controllers | hub | agent | demo) echo "kubenest-$1" ;;
    *) echo "" ;;
  esac
}
log() { echo "[images] $*" >&2; }

check=false
names=()
for arg in "$@"; do
  case $arg in
    --print-env)
      echo "KUBENEST_IMAGES_DIR=$out"
      echo "KUBENEST_IMAGES_VERSION=$version"
      for name in "${all[@]}"; do
        key=$(tr '[:lower:]' '[:upper:]' <<<"$name")
        echo "KUBENEST_IMAGE_$key=$(image_of "$name")"
        echo "KUBENEST_IMAGE_${key}_ARCHIVE=$(archive_of "$name")"
      done
      exit 0
      ;;
    --check) check=true ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    base | apiserver | controllers | hub | agent | demo | postgres | redis | kafka | builder)
      names+=("$arg")
      ;;
    *)
      echo "build-images.sh: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done
((${#names[@]})) || names=("${all[@]}")

for tool in buildah debootstrap strip; do
  command -v "$tool" >/dev/null || {
    echo "build-images.sh: $tool is missing: run tools/setup.sh" >&2
    exit 1
  }
done

export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
# Our own image store in the cache: rebuilds never touch the machine's default store.
bh() { buildah --root "$out/storage" --runroot "$out/run" --storage-driver vfs "$@"; }

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

# The cargo binaries the requested images need.
bins=()
for name in "${names[@]}"; do
  bin=$(binary_of "$name")
  [[ -z $bin ]] || bins+=("$bin")
done
if ((${#bins[@]})) && [[ ${KUBENEST_IMAGE_NO_CARGO:-0} != 1 ]]; then
  args=()
  for bin in "${bins[@]}"; do args+=(--bin "$bin"); done
  [[ $profile == debug ]] || args+=(--profile "$profile")
  start=$SECONDS
  # Run from a test, this inherits the variables cargo sets for the test (CARGO_MANIFEST_DIR,
  # CARGO_PKG_*, ...). A build script that watches one (ring's watches CARGO_MANIFEST_DIR) then
  # reruns, and everything above it is rebuilt: here, and again by the next plain cargo
  # command (`make test`'s next run, tools/prune-target.sh), which cost CI minutes.
  unset_cargo=()
  while IFS= read -r name; do unset_cargo+=(-u "$name"); done < <(
    compgen -e | grep -E '^CARGO_(MANIFEST_|PKG_|CRATE_|BIN_|PRIMARY_|TARGET_TMPDIR|RUSTC_CURRENT)' || true)
  (cd "$repo" && env "${unset_cargo[@]}" CARGO_TARGET_DIR="$target" cargo build --quiet "${args[@]}")
  log "cargo build ($profile) of ${bins[*]}: $((SECONDS - start))s"
fi

# sha256 of every file under a directory, by relative path: the inputs of a build.
tree_hash() {
  (cd "$1" && find . \( -type f -o -type l \) -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum) | sha256sum | cut -c1-64
}

# The base rootfs tarball, cached by its recipe and the machine's Debian release and sources.
base_rootfs() {
  local key tar
  key=$( (
    cat "$repo/images/base/rootfs.sh" /etc/os-release
    apt-get indextargets --format '$(RELEASE) $(IDENTIFIER) $(REPO_URI)' | sort -u
  ) | sha256sum | cut -c1-16)
  tar=$out/base-rootfs-$key.tar
  if [[ ! -e $tar ]]; then
    local start=$SECONDS
    log "base: debootstrap of a minimal Debian root..."
    "$repo/images/base/rootfs.sh" "$tar"
    log "base: rootfs in $((SECONDS - start))s ($(du -h "$tar" | cut -f1))"
    find "$out" -maxdepth 1 -name 'base-rootfs-*.tar' -not -name "base-rootfs-$key.tar" -delete
  fi
  echo "$tar"
}

# Kafka's jars (images/kafka/pom.xml at the pinned versions), resolved from Maven once per pom
# and versions into a folder of the cache; prints the folder. Maven's own downloads stay in
# $KUBENEST_CACHE/maven.
kafka_libs() {
  local pom=$repo/images/kafka/pom.xml key dir
  key=$( (
    cat "$pom"
    echo "$KAFKA_VERSION $KAFKA_LOG4J_VERSION $MAVEN_DEPENDENCY_PLUGIN_VERSION"
  ) | sha256sum | cut -c1-16)
  dir=$cache/kafka-libs/$key
  if [[ ! -d $dir ]]; then
    if ! command -v mvn >/dev/null; then
      log "kafka: installing Debian's maven..."
      local sudo=""
      [[ $(id -u) == 0 ]] || sudo=sudo
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends maven >&2
    fi
    local start=$SECONDS
    rm -rf "$dir.tmp"
    mvn -B -q -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$cache/maven" \
      -Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$KAFKA_LOG4J_VERSION" \
      "org.apache.maven.plugins:maven-dependency-plugin:$MAVEN_DEPENDENCY_PLUGIN_VERSION:copy-dependencies" \
      -DincludeScope=runtime -DoutputDirectory="$dir.tmp" >&2
    mv "$dir.tmp" "$dir"
    log "kafka: $(find "$dir" -name '*.jar' | wc -l) jars of Kafka $KAFKA_VERSION resolved in $((SECONDS - start))s ($(du -sh "$dir" | cut -f1))"
    find "$cache/kafka-libs" -mindepth 1 -maxdepth 1 -not -name "$key" -exec rm -rf {} +
  fi
  echo "$dir"
}

# Fills the build context of image $1 in directory $2.
stage() {
  local name=$1 ctx=$2 bin
  rm -rf "$ctx"
  mkdir -p "$ctx"
  cp -a "$repo/images/$name/." "$ctx/"
  bin=$(binary_of "$name")
  if [[ -n $bin ]]; then
    local src=$target/$profile/$bin
    [[ -x $src ]] || {
      echo "build-images.sh: $src is missing (cargo build -p $bin)" >&2
      exit 1
    }
    # Debug information and symbols are half of a debug binary and no use in a container: a
    # panic's message names its file and line without them.
    strip --strip-all -o "$ctx/$bin" "$src"
  fi
  case $name in
    base) ln "$(base_rootfs)" "$ctx/rootfs.tar" ;;
    agent)
      local helm=$cache/helm/$HELM_VERSION/helm
      [[ -x $helm ]] || {
        echo "build-images.sh: $helm is missing: run tools/setup.sh" >&2
        exit 1
      }
      cp "$helm" "$ctx/helm"
      cp -r "$repo/charts/addons" "$ctx/addons"
      ;;
    kafka) cp -r "$(kafka_libs)" "$ctx/libs" ;;
  esac
}

# The label that records what an image in the store was built from.
stored_inputs() {
  bh inspect --type image --format '{{index .OCIv1.Config.Labels "io.kubenest.inputs"}}' "$1" \
    2>/dev/null || true
}

# Runs the programs of image $1 inside its root filesystem, as the image's user: proof that
# they link and start. PostgreSQL and Redis also serve one query on a socket in /tmp.
check_image() {
  local name=$1 ctr status=0
  ctr=$(bh from --pull-never --quiet "$(image_of "$name")")
  local -a cmds
  case $name in
    apiserver) cmds=("kubenest-apiserver --version") ;;
    agent) cmds=("kubenest-agent --version" "helm version --short" "git --version"
      "helm template check /opt/kubenest/charts/addons/postgres --set kubenest.exportSecret=s |
       grep -c '^kind:' | sed 's/\$/ objects rendered from the catalog/'") ;;
    postgres) cmds=("postgres --version" "pg_isready --version"
      "export POSTGRES_USER=app POSTGRES_DB=app POSTGRES_PASSWORD=check PGDATA=/tmp/check/data
       mkdir -p /tmp/check; postgres-entrypoint -c listen_addresses= -c unix_socket_directories=/tmp/check >/dev/null 2>&1 &
       for _ in \$(seq 100); do pg_isready -q -h /tmp/check && break; sleep 0.1; done
       psql -h /tmp/check -U app -d app -Atc 'SELECT current_database()'; s=\$?
       kill %1; wait; exit \$s") ;;
    redis) cmds=("redis-server --version"
      "redis-server --port 0 --unixsocket /tmp/check.sock --save '' --daemonize yes >/dev/null
       for _ in \$(seq 100); do [ -S /tmp/check.sock ] && break; sleep 0.1; done
       redis-cli -s /tmp/check.sock ping; s=\$?; redis-cli -s /tmp/check.sock shutdown nosave; exit \$s") ;;
    kafka) cmds=("java -version 2>&1 | head -1" "kafka-topics --version"
      "p=\$((20000 + RANDOM % 20000)) # the host's network: a port no other check picks
       export KAFKA_DATA=/tmp/check KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:\$p
       timeout 120 kafka-entrypoint listeners=PLAINTEXT://127.0.0.1:\$p,CONTROLLER://127.0.0.1:\$((p + 1)) \\
         controller.quorum.voters=1@127.0.0.1:\$((p + 1)) >/tmp/broker.log 2>&1 &
       for _ in \$(seq 120); do grep -q 'Kafka Server started' /tmp/broker.log && break; sleep 0.5; done
       echo kept | kafka-console-producer --bootstrap-server 127.0.0.1:\$p --topic check 2>/dev/null
       got=\$(kafka-console-consumer --bootstrap-server 127.0.0.1:\$p --topic check \\
         --from-beginning --max-messages 1 --timeout-ms 30000 2>/dev/null)
       kill %1; wait; echo \"a record read back: \$got\"; [ \"\$got\" = kept ]") ;;
    builder) cmds=("buildah --version" "git --version" "ssh -V 2>&1"
      "kubenest-build 2>&1 | grep -c 'GIT_REPOSITORY is not set' | sed 's/\$/ refusal without a repository/'") ;;
    *) cmds=("$(binary_of "$name") --version") ;;
  esac
  for cmd in "${cmds[@]}"; do
    if said=$(bh run "$ctr" -- /bin/bash -c "$cmd" 2>&1); then
      log "$name: ok: ${cmd%%$'\n'*}: ${said##*$'\n'}"
    else
      log "$name: FAILED: $cmd: $said"
      status=1
    fi
  done
  bh rm "$ctr" >/dev/null
  return $status
}

# Builds image $1 unless its inputs are unchanged; archives it unless it is the base.
build() {
  local name=$1 ctx=$out/context/$1 image hash archive start=$SECONDS
  image=$(image_of "$name")
  archive=$(archive_of "$name")
  stage "$name" "$ctx"
  hash=$( (
    tree_hash "$ctx"
    echo "$version"
    [[ $name == base ]] || stored_inputs "$(image_of base)"
  ) | sha256sum | cut -c1-64)
  # The context is rebuilt on every run; it only has to outlive this build.
  trap 'rm -rf "$out/context"' EXIT
  if [[ $name == base ]]; then
    if [[ $(stored_inputs "$image") == "$hash" ]]; then
      log "base: unchanged ($image)"
      return 0
    fi
  elif [[ -e $archive && $(cat "$archive.inputs" 2>/dev/null) == "$hash" ]]; then
    log "$name: unchanged ($image, $archive)"
    if $check; then check_image "$name"; fi
    return 0
  fi
  log "$name: building $image..."
  bh bud --quiet --layers=false -f "$ctx/Containerfile" --build-arg "BASE=$(image_of base)" \
    --label "io.kubenest.inputs=$hash" \
    --label "org.opencontainers.image.title=kubenest-$name" \
    --label "org.opencontainers.image.version=$version" \
    -t "$image" "$ctx" >/dev/null
  if [[ $name != base ]]; then
    check_image "$name"
    rm -f "$archive.tmp"
    bh push --quiet "$image" "oci-archive:$archive.tmp:$image"
    mv "$archive.tmp" "$archive"
    echo "$hash" >"$archive.inputs"
  fi
  local size
  size=$(bh images --format '{{.Size}}' "$image" 2>/dev/null || echo "?")
  log "$name: built in $((SECONDS - start))s (image $size$(
    [[ $name == base ]] || echo ", archive $(du -m "$archive" | cut -f1) MiB"))"
}

build base
for name in "${names[@]}"; do
  [[ $name == base ]] || build "$name"
done
# Images a rebuild replaced, and build containers an interrupted run left.
bh rm --all >/dev/null 2>&1 || true
bh rmi --prune >/dev/null 2>&1 || true
