#!/usr/bin/env bash
# A second RabbitMQ node, 4.x, from a Debian trixie chroot, next to the
# host's broker and without touching the host's packages.
#
# Debian trixie ships rabbitmq-server 4.0.x on Erlang/OTP 27 (4.0.5 when
# this was written). This script builds a minimal trixie chroot with
# debootstrap (once), configures a node in it and runs it:
#
#   node           rabbit4@localhost   (RABBIT4_NODE)
#   AMQP           127.0.0.1:5673      (RABBIT4_PORT)
#   distribution   25673               (RABBIT4_DIST_PORT)
#   management     off (no plugin enabled but this project's)
#   data, logs     <chroot>/var/lib/rabbitmq/mnesia, <chroot>/var/log/rabbitmq
#
# epmd (4369) is the host's, shared. The host's broker (rabbit@localhost,
# 5672) is never touched.
#
# Usage (as root):
#   rabbitmq4-chroot.sh setup     debootstrap the chroot if missing, write config
#   rabbitmq4-chroot.sh start     setup, mount /proc and /dev, start the node, wait
#   rabbitmq4-chroot.sh stop      stop the node, unmount
#   rabbitmq4-chroot.sh status    say whether it runs (exit 0) or not (exit 3)
#   rabbitmq4-chroot.sh ctl ARGS      rabbitmqctl ARGS in the chroot (node: rabbit4)
#   rabbitmq4-chroot.sh plugins ARGS  rabbitmq-plugins ARGS in the chroot
#   rabbitmq4-chroot.sh install   build and enable the delaybench plugin on the
#                                 node: runs rabbitmq-plugin/install.sh inside
#                                 the chroot (its erlc, its rabbitmqctl)
#   rabbitmq4-chroot.sh wrappers DIR
#                                 write rabbitmqctl / rabbitmq-plugins /
#                                 rabbitmq-server scripts into DIR that run the
#                                 chroot's tools (rabbitmq-server -detached =
#                                 start); put DIR first on PATH for the plugin
#                                 tests' restart test
#
# Environment: RABBIT4_CHROOT (default /srv/trixie), RABBIT4_MIRROR
# (default http://deb.debian.org/debian), RABBIT4_NODE, RABBIT4_PORT,
# RABBIT4_DIST_PORT.
set -euo pipefail

CHROOT=${RABBIT4_CHROOT:-/srv/trixie}
MIRROR=${RABBIT4_MIRROR:-http://deb.debian.org/debian}
NODE=${RABBIT4_NODE:-rabbit4@localhost}
PORT=${RABBIT4_PORT:-5673}
DIST_PORT=${RABBIT4_DIST_PORT:-25673}
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
PLUGIN_DIR=$(cd "$(dirname "$0")/.." && pwd)

say() { printf '[rabbitmq4-chroot] %s\n' "$*"; }
die() { printf '[rabbitmq4-chroot] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (chroot, mount)"

# Run a command in the chroot with a clean environment (no RABBITMQ_* of
# the caller leaks in; the node's settings come from its rabbitmq-env.conf).
in_chroot() {
  chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 LC_ALL=C.UTF-8 "$@"
}

ctl() { in_chroot /usr/sbin/rabbitmqctl -n "$NODE" "$@"; }
plugins() { in_chroot /usr/sbin/rabbitmq-plugins -n "$NODE" "$@"; }

setup() {
  if [ ! -x "$CHROOT/usr/sbin/rabbitmq-server" ]; then
    command -v debootstrap >/dev/null 2>&1 || {
      say "installing debootstrap (apt-get)"
      apt-get install -y debootstrap >/dev/null
    }
    say "debootstrap trixie into $CHROOT (rabbitmq-server, erlang-dev)"
    mkdir -p "$CHROOT"
    debootstrap --variant=minbase --include=rabbitmq-server,erlang-dev \
      trixie "$CHROOT" "$MIRROR"
  fi
  local etc=$CHROOT/etc/rabbitmq server
  server=$(cd "$CHROOT" && ls -d usr/lib/rabbitmq/lib/rabbitmq_server-* | sort -V | tail -n1)
  [ -n "$server" ] || die "no rabbitmq_server-* under $CHROOT/usr/lib/rabbitmq/lib"
  mkdir -p "$etc" "$CHROOT/usr/lib/rabbitmq/plugins"
  cat >"$etc/rabbitmq-env.conf" <<EOF
# Written by rabbitmq-plugin/scripts/rabbitmq4-chroot.sh
NODENAME=$NODE
NODE_IP_ADDRESS=127.0.0.1
NODE_PORT=$PORT
DIST_PORT=$DIST_PORT
MNESIA_BASE=/var/lib/rabbitmq/mnesia
LOG_BASE=/var/log/rabbitmq
# The server's default plugins path, also for rabbitmq-plugins (Debian's
# wrapper would give that CLI only the second folder): install.sh puts the
# plugin into the first.
PLUGINS_DIR=/usr/lib/rabbitmq/plugins:/$server/plugins
# distribution on the loopback interface only
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
EOF
  cat >"$etc/rabbitmq.conf" <<EOF
# Written by rabbitmq-plugin/scripts/rabbitmq4-chroot.sh
listeners.tcp.local = 127.0.0.1:$PORT
EOF
  # No plugin but the project's (management off); install.sh enables it.
  [ -f "$etc/enabled_plugins" ] || echo '[].' >"$etc/enabled_plugins"
  in_chroot chown -R rabbitmq:rabbitmq /etc/rabbitmq /var/lib/rabbitmq /var/log/rabbitmq
  grep -q '^127.0.0.1[[:space:]].*localhost' "$CHROOT/etc/hosts" 2>/dev/null \
    || echo '127.0.0.1 localhost' >>"$CHROOT/etc/hosts"
}

mount_fs() {
  mountpoint -q "$CHROOT/proc" || mount -t proc proc "$CHROOT/proc"
  mountpoint -q "$CHROOT/dev" || mount --bind /dev "$CHROOT/dev"
}

umount_fs() {
  for m in "$CHROOT/dev" "$CHROOT/proc"; do
    if mountpoint -q "$m"; then umount "$m" || umount -l "$m"; fi
  done
}

running() { ctl -q status >/dev/null 2>&1; }

# PIDs of the processes whose root is the chroot (the node, its helpers).
chroot_pids() {
  local d root want
  want=$(readlink -f "$CHROOT")
  for d in /proc/[0-9]*; do
    root=$(readlink "$d/root" 2>/dev/null || true)
    [ "$root" = "$want" ] && echo "${d#/proc/}"
  done
  return 0
}

start() {
  setup
  mount_fs
  if running; then say "$NODE already running"; return 0; fi
  say "starting $NODE (AMQP 127.0.0.1:$PORT, dist $DIST_PORT)"
  # The server runs as the chroot's rabbitmq user, in its own session,
  # detached from this shell (none of its processes keeps this script's
  # stdout: runuser stays as the server's parent); its console output goes
  # to startup_log.
  in_chroot setsid sh -c 'cd /var/lib/rabbitmq && exec runuser -u rabbitmq -- \
      /usr/lib/rabbitmq/bin/rabbitmq-server >/var/log/rabbitmq/startup_log \
      2>/var/log/rabbitmq/startup_err </dev/null' </dev/null >/dev/null 2>&1 &
  disown || true
  local ok=""
  for _ in $(seq 1 60); do
    if ctl -q await_startup --timeout 5 >/dev/null 2>&1; then ok=1; break; fi
    sleep 2
  done
  [ -n "$ok" ] || die "$NODE did not come up; see $CHROOT/var/log/rabbitmq/"
  say "$NODE is up: $(ctl -q eval 'rabbit_misc:version().' | tr -d '"')"
}

stop() {
  if running; then
    say "stopping $NODE"
    ctl -q stop >/dev/null 2>&1 || true
  fi
  for _ in $(seq 1 30); do
    [ -z "$(chroot_pids)" ] && break
    sleep 1
  done
  local left
  left=$(chroot_pids)
  [ -z "$left" ] || die "processes of the chroot still run: $left"
  umount_fs
  say "stopped"
}

status() {
  if running; then
    say "$NODE running: $(ctl -q eval 'rabbit_misc:version().' | tr -d '"'), AMQP 127.0.0.1:$PORT"
    return 0
  fi
  say "$NODE not running"
  return 3
}

install_plugin() {
  running || die "$NODE is not running: $0 start"
  local dst=/tmp/delaybench-plugin
  rm -rf "$CHROOT$dst"
  mkdir -p "$CHROOT$dst"
  cp -r "$PLUGIN_DIR/src" "$PLUGIN_DIR/install.sh" "$CHROOT$dst/"
  in_chroot DELAYBENCH_RABBIT_NODE="$NODE" bash "$dst/install.sh"
}

wrappers() {
  local dir=${1:?wrappers DIR}
  mkdir -p "$dir"
  for t in rabbitmqctl rabbitmq-plugins; do
    cat >"$dir/$t" <<EOF
#!/bin/sh
# $t of the RabbitMQ 4 chroot node (written by $SELF)
exec chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 LC_ALL=C.UTF-8 /usr/sbin/$t "\$@"
EOF
    chmod 755 "$dir/$t"
  done
  cat >"$dir/rabbitmq-server" <<EOF
#!/bin/sh
# rabbitmq-server [-detached] of the RabbitMQ 4 chroot node = start (written by $SELF)
exec "$SELF" start
EOF
  chmod 755 "$dir/rabbitmq-server"
  say "wrote $dir/{rabbitmqctl,rabbitmq-plugins,rabbitmq-server}"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  setup) setup ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  ctl) mount_fs; ctl "$@" ;;
  plugins) mount_fs; plugins "$@" ;;
  install) install_plugin ;;
  wrappers) wrappers "$@" ;;
  *) die "usage: $0 setup|start|stop|status|ctl ARGS|plugins ARGS|install|wrappers DIR" ;;
esac
