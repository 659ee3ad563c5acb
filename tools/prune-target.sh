#!/usr/bin/env bash
# Removes stale executables from cargo's target directory: test binaries and programs that an
# earlier build made and the current tree no longer builds (a dependency's feature or a
# version changed their hash). CI keeps the target directory between runs, and without this
# every such change leaves another 200–300 MB test binary per test target behind: 15 GB of
# 19 here after a few days, and a small CI disk ran out during a link.
#
# What is current is what cargo itself reports for the build `make test` runs
# (`cargo test --workspace --no-run --message-format=json`: nothing is rebuilt when it is
# fresh); a program's copy under deps/ is kept with the uplifted binary it is a hard link of.
# Libraries are left alone (a few GB at most, and `make lint`'s check artifacts live beside
# them).
#
#   tools/prune-target.sh
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
deps=$target/debug/deps
[[ -d $deps ]] || exit 0

current=$(mktemp)
trap 'rm -f "$current"' EXIT
cargo test --workspace --no-run --quiet --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and message.get("executable"):
        print(message["executable"])
' >"$current"

python3 - "$deps" "$current" <<'PY'
import os, sys
deps, listing = sys.argv[1], sys.argv[2]
keep = set()
for path in open(listing).read().split():
    try:
        st = os.stat(path)
        keep.add((st.st_dev, st.st_ino))
    except FileNotFoundError:
        pass
if not keep:
    sys.exit("prune-target: cargo reported no executable; nothing removed")
removed = freed = 0
for name in os.listdir(deps):
    path = os.path.join(deps, name)
    if "." in name or not os.path.isfile(path) or not os.access(path, os.X_OK):
        continue
    st = os.stat(path)
    if (st.st_dev, st.st_ino) in keep:
        continue
    freed += st.st_size
    removed += 1
    os.remove(path)
print(f"prune-target: removed {removed} stale executables ({freed / 1e9:.1f} GB), kept {len(keep)}")
PY
