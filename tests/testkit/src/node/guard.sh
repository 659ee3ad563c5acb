# The real node's guard: holds the machine-wide lock for as long as the node lives, and cleans the
# host when the node ends, however it ends. Run as `sh -c GUARD guard LOCK HOLDER CLEANUP ARGS...`.
#
# The lock is flock(2) on LOCK, held on fd 9 by this process: the kernel releases it when the
# guard exits, never before the host is clean. If another guard holds it, prints `busy` and the
# holder's description (written into LOCK) and exits. Otherwise it removes whatever an earlier
# node left behind, prints `locked`, then reads `+PGID` lines (the node's process groups) on
# stdin until end of file, which comes when the owner stops the node or dies: then it kills those
# groups, cleans up (CLEANUP ARGS...), and exits, releasing the lock. It ignores terminal signals
# so that Ctrl-C on the owner cannot skip the cleanup.
trap '' INT TERM HUP QUIT
lock=$1 holder=$2 cleanup=$3
shift 3
exec 9>>"$lock" || exit 1
if ! flock -n 9; then
  echo "busy $(cat "$lock")"
  exit 0
fi
printf '%s\n' "$holder" >"$lock"
sh "$cleanup" "$@" >&2
echo locked
groups=""
while IFS= read -r line; do
  case "$line" in
    +*) groups="$groups ${line#+}" ;;
  esac
done
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done
sh "$cleanup" "$@" >&2
: >"$lock"
