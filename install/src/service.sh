#!/bin/sh
# kubenest-service: how the install's stages start and ask after a program on a machine, the
# same on every machine. A service NAME is the script /etc/kubenest/services/NAME.sh (which
# the stage put there, and which execs the program).
#
#   kubenest-service start NAME    runs it, unless it runs already (idempotent)
#   kubenest-service restart NAME  runs it again (its script changed)
#   kubenest-service status NAME   "running" or "stopped" (exit 1)
#   kubenest-service logs NAME     its last 50 lines
#
# Where systemd is PID 1 (a Debian host) a service is the unit kubenest-NAME.service, restarted
# when it ends; elsewhere (a local machine, whose PID 1 is its own init) it is a process of its
# own session under the machine's init, its pid in /run/kubenest/NAME.pid and its output in
# /var/log/kubenest/NAME.log.
set -eu
command=${1:-}
name=${2:-}
case $name in
  '' | *[!a-z0-9-]*) echo "kubenest-service: no service named '$name'" >&2; exit 2 ;;
esac
script=/etc/kubenest/services/$name.sh
[ -f "$script" ] || { echo "kubenest-service: no $script" >&2; exit 2; }

if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then
  unit=kubenest-$name.service
  case $command in
    start | restart)
      cat >"/etc/systemd/system/$unit.new" <<UNIT
[Unit]
Description=kubenest $name
After=network-online.target
[Service]
ExecStart=/bin/sh $script
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
UNIT
      mv "/etc/systemd/system/$unit.new" "/etc/systemd/system/$unit"
      systemctl daemon-reload
      systemctl enable "$unit" >/dev/null 2>&1
      if [ "$command" = restart ]; then systemctl restart "$unit"; else systemctl start "$unit"; fi
      ;;
    status) systemctl is-active --quiet "$unit" && echo running || { echo stopped; exit 1; } ;;
    logs) journalctl -u "$unit" -n 50 --no-pager ;;
    *) echo "kubenest-service: start, restart, status or logs" >&2; exit 2 ;;
  esac
  exit 0
fi

pidfile=/run/kubenest/$name.pid
log=/var/log/kubenest/$name.log
running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
case $command in
  start | restart)
    mkdir -p /run/kubenest /var/log/kubenest
    if running; then
      [ "$command" = start ] && exit 0
      kill "$(cat "$pidfile")" 2>/dev/null || true
      while running; do sleep 0.2; done
    fi
    setsid sh "$script" >>"$log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    ;;
  status) running && echo running || { echo stopped; exit 1; } ;;
  logs) tail -n 50 "$log" 2>/dev/null || true ;;
  *) echo "kubenest-service: start, restart, status or logs" >&2; exit 2 ;;
esac
