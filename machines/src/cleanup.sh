# Removes everything the local machines put on the host, and nothing else: their processes (found
# by their cgroups, which every process of a machine inherits), their cgroups in every hierarchy,
# their veths and the host bridge (with the routes through it) and their files. Idempotent, and
# safe when nothing is there. Run by `kubenest-dev machines down` and `up`, and by the test kit's
# guard before its machines are made and after they end, as
#   sh cleanup.sh STATE_DIR BRIDGE CGROUP_PREFIX
state=$1 bridge=$2 prefix=$3

# Each machine's first process is PID 1 of its PID namespace: killing it kills the rest of the
# machine. Anything left (a process that escaped into the cgroup by other means) is killed too.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  pids=$(find /sys/fs/cgroup/*/"$prefix"* -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
  [ -n "$pids" ] || break
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
  sleep 0.5
done

# The cgroups, deepest first (the kubelet's pod cgroups are nested under the machine's).
for hierarchy in /sys/fs/cgroup/*/; do
  for top in "$hierarchy$prefix"*; do
    [ -d "$top" ] || continue
    find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null
    [ -d "$top" ] && echo "cleanup: cannot remove cgroup $top"
  done
done

# The veths end with their machines' network namespaces; one whose namespace is still held
# (a debugging session's `ip netns`) is deleted from this end. Then the bridge, which takes the
# host's routes to the machines' pods with it.
for port in /sys/class/net/"$bridge"/brif/*; do
  [ -e "$port" ] && ip link delete "${port##*/}" 2>/dev/null
done
ip link delete "$bridge" 2>/dev/null

# Nothing of the machines is mounted in the host's namespace; a stray mount under the state
# folder (a debugging session's) is detached so that the folder can go.
awk -v s="$state" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo |
  sort -r | while IFS= read -r m; do umount -l "$m" 2>/dev/null; done
rm -rf "$state"
exit 0
