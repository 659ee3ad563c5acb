# Removes everything a real node puts on the host outside the processes the kit starts, so the
# machine is as before: the pods' containers, mounts, iptables rules, conntrack entries, the CNI
# bridge and the node's files. Idempotent, and safe when nothing is there. Run by the guard
# (guard.sh) before a node starts and after it stops, as
#   sh cleanup.sh STATE_DIR BRIDGE SUBNET CNI_NETWORK
state=$1 bridge=$2 subnet=$3 network=$4
sock=$state/containerd/containerd.sock

# Containers: each shim of this node's containerd (found by its socket in the shim's arguments)
# and its children, the containers' first processes; killing those ends their PID namespaces.
for shim in $(ps -eo pid=,args= | awk -v s="-address $sock" 'index($0, s) && /containerd-shim/ { print $1 }'); do
  for child in $(ps -o pid= --ppid "$shim"); do kill -KILL "$child" 2>/dev/null; done
  kill -KILL "$shim" 2>/dev/null
done

# Mounts under the state dir (container root filesystems, volumes, network namespaces), deepest
# first, detached lazily so that a busy one cannot stop the rest.
awk -v s="$state" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo |
  sort -r | while IFS= read -r m; do umount -l "$m" 2>/dev/null; done

# iptables: kube-proxy's chains (KUBE-*) and the CNI plugins' (CNI-*), and every rule that jumps
# to them, in each table, for IPv4 and IPv6. A table is rewritten only when it has such rules.
for cmd in iptables ip6tables; do
  command -v "$cmd-save" >/dev/null 2>&1 || continue
  for table in nat filter mangle; do
    rules=$("$cmd-save" -t "$table" 2>/dev/null) || continue
    printf '%s\n' "$rules" | grep -qE 'KUBE-|CNI-' || continue
    printf '%s\n' "$rules" | grep -vE 'KUBE-|CNI-' | "$cmd-restore" 2>&1 || echo "cleanup: $cmd-restore -t $table failed"
  done
done

# Connection tracking entries of the pod subnet: a stale NAT entry would misroute the next run.
if command -v conntrack >/dev/null 2>&1; then
  conntrack -D -s "$subnet" >/dev/null 2>&1
  conntrack -D -d "$subnet" >/dev/null 2>&1
fi

ip link delete "$bridge" 2>/dev/null
rm -f /var/lib/cni/results/"$network"-* 2>/dev/null
rm -rf "$state"
exit 0
