# Removes everything a real node puts on the host outside the processes the kit starts, so the
# machine is as before: the pods' containers, mounts, the nftables tables of kube-proxy and
# kube-network-policies, the CNI plugins' iptables rules, conntrack entries, the CNI bridge and
# the node's files, and nothing else. Idempotent, and safe when nothing is there. Run by the
# guard (guard.sh) before a node starts and after it stops, as
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

# Only what this node made goes; a laptop's own k3s, kind or minikube keeps its rules. The
# kubelet makes no iptables chains here (`makeIPTablesUtilChains: false`, config.rs).
#
# kube-proxy runs in nftables mode (config.rs), so its rules are its own nftables table,
# `kube-proxy`, in the ip and ip6 families: removed whole.
if command -v nft >/dev/null 2>&1; then
  for family in ip ip6; do
    nft list table "$family" kube-proxy >/dev/null 2>&1 && nft delete table "$family" kube-proxy
  done
  # kube-network-policies (netpol.rs) keeps one table, in the inet family. Killed, it leaves the
  # table behind, and its NFQUEUE rules would then drop the policed pods' packets.
  nft list table inet kube-network-policies >/dev/null 2>&1 && nft delete table inet kube-network-policies
fi

# The CNI plugins' iptables rules (the bridge's masquerade, portmap's forwards) carry the
# network's name in their comment (`name: "NETWORK" id: "CONTAINER"`): each such rule is
# deleted, then the per-pod chains they jump to (CNI-<hash>, CNI-DN-<hash>) are flushed and
# removed. The shared CNI-HOSTPORT-* chains and every untagged rule are left alone.
for cmd in iptables ip6tables; do
  command -v "$cmd-save" >/dev/null 2>&1 || continue
  for table in nat filter mangle; do
    rules=$("$cmd-save" -t "$table" 2>/dev/null) || continue
    # The tag as iptables-save quotes it, `name: \"NETWORK\"`; through ENVIRON, which awk takes
    # as is (-v would unescape it).
    ours=$(printf '%s\n' "$rules" | tag="name: \\\"$network\\\"" awk '
      $1 == "-A" && index($0, ENVIRON["tag"]) {
        for (i = 1; i < NF; i++) if ($i == "-j" && $(i + 1) ~ /^CNI-/ && $(i + 1) !~ /^CNI-HOSTPORT-/) chains[$(i + 1)] = 1
        sub(/^-A/, "-D"); print
      }
      END { for (c in chains) print "-F " c; for (c in chains) print "-X " c }')
    [ -n "$ours" ] || continue
    printf '*%s\n%s\nCOMMIT\n' "$table" "$ours" | "$cmd-restore" --noflush 2>&1 ||
      echo "cleanup: $cmd-restore -t $table failed"
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
