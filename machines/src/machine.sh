# One local machine's first process. Started as `setsid --fork sh DIR/machine.sh hold DIR PROCS...`
# (DIR is the machine's folder on the host, its last component the machine's name): sends its
# output to DIR/machine.log, writes its pid to DIR/hold.pid, puts itself into each cgroup whose
# `cgroup.procs` file is given (the machine's own, so everything it starts is counted there and
# the cleanup can find it), then becomes, through unshare, the first process (PID 1) of new
# network, mount, UTS and PID namespaces, running `machine.sh init DIR`. Of the descriptors it
# was given, the machines' lock alone stays open in PID 1: the persistent machines' lock is held
# that way (persistent.rs).
#
# `init` gives the machine its own hostname, /etc (an overlay over the host's: its writes land
# in DIR/etc.upper), /var (DIR/var), /run, /tmp and /dev/shm (empty tmpfs), /proc (its own
# processes) and /sys (its own network devices; the host's cgroup hierarchies stay mounted
# under it, since the kubelet and runc manage cgroups there), makes its mounts shared within the
# machine (containerd and the kubelet expect `/` to be rshared), says `ready` and waits, reaping
# orphans. Its death ends the PID namespace: the kernel kills every process of the machine,
# which ends the network namespace (and the veth in it) and the mount namespace with them.
set -eu
mode=$1 dir=$2
shift 2
name=${dir##*/}
case $mode in
hold)
  exec </dev/null >>"$dir/machine.log" 2>&1
  for procs in "$@"; do echo $$ >"$procs"; done
  echo $$ >"$dir/hold.pid"
  # The machines' lock ($MACHINES_LOCK, lib.rs) is the only descriptor passed on: any other the
  # maker was left with (a CI runner's pipe) would stay open for as long as the machine runs.
  # bash, since dash cannot name a descriptor above 9.
  exec bash -c 'for f in /proc/$$/fd/*; do
      n=${f##*/}
      [ "$n" -gt 2 ] && [ "$(readlink "$f")" != "$MACHINES_LOCK" ] && eval "exec $n>&-"
    done
    exec "$@"' close-fds \
    unshare --net --mount --uts --pid --fork --propagation private -- sh "$0" init "$dir"
  ;;
init)
  hostname "$name"
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$dir/etc.upper,workdir=$dir/etc.work" /etc
  mount --bind "$dir/var" /var
  mount -t tmpfs -o mode=755 tmpfs /run
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  mount -t proc proc /proc
  mkdir /run/.cgroup
  mount --rbind /sys/fs/cgroup /run/.cgroup
  mount -t sysfs sysfs /sys
  mount --move /run/.cgroup /sys/fs/cgroup
  rmdir /run/.cgroup
  mount --make-rshared /
  echo ready
  # PID 1 reaps the machine's orphans: dash's `wait` collects any child that ends, adopted
  # ones too (`exec sleep infinity` here left them as zombies).
  while :; do
    sleep 3600 &
    wait $!
  done
  ;;
esac
exit 2
