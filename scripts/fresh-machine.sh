#!/usr/bin/env bash
# The README's test command on a fresh Debian machine, made on this one: a
# Debian 12 root file system from debootstrap (nothing of the services: no
# PostgreSQL, MariaDB, Redis, RabbitMQ, Erlang, openssl tools, Chromium)
# run in a network namespace of its own (its services listen on the
# standard ports without meeting this machine's) and a PID namespace (every
# process it started ends with it). It gets a clone of this repository's
# HEAD and the Rust toolchain of this machine (read-only: the README asks
# for Rust first), reaches Debian's mirror and crates.io through NAT, and
# runs `bash scripts/test.sh` there as root, so the set-up (packages, the
# PostgreSQL role and database, MariaDB's root over TCP, the plugin, TLS)
# is done by the test command itself, from nothing.
#
# Usage: scripts/fresh-machine.sh [DIR] [-- TEST-COMMAND...]
#   DIR   where the root file system goes (default target/fresh-machine;
#         debootstrap runs only when DIR/root is missing; delete DIR for a
#         new one). The log is DIR/test.log.
#   TEST-COMMAND  run instead of `bash scripts/test.sh` (in the clone)
# Needs root, debootstrap, iptables and iproute2 (apt-get install
# debootstrap iptables iproute2). About 1.5 GB of packages and crates are
# downloaded; on two cores the whole took 18 minutes here (1021 s in the test command).
#
# The body is one block, read whole before it runs: bash reads a script as
# it goes, so editing this file during a run would change the run.
{
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

dir=target/fresh-machine
if [ $# -gt 0 ] && [ "$1" != -- ]; then
  dir=$1
  shift
fi
command=(bash scripts/test.sh)
if [ $# -gt 0 ] && [ "$1" = -- ]; then
  shift
  [ $# -gt 0 ] && command=("$@")
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
root=$dir/root
ns=dlb-fresh
host_if=dlbf0
ns_if=dlbf1
net=10.231.9

die() { echo "fresh-machine: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root (debootstrap, chroot, ip netns)"
for tool in debootstrap iptables ip unshare; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$tool not found: apt-get install debootstrap iptables iproute2 util-linux"
done

rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$rustup_home/toolchains" ] && [ -x "$cargo_bin/cargo" ] ||
  die "no rustup toolchain in $rustup_home and $cargo_bin (the root gets this machine's, read-only; install Rust with rustup)"

if [ ! -x "$root/bin/bash" ]; then
  echo "fresh-machine: debootstrap bookworm into $root"
  # What a fresh Debian machine with Rust has (rustup needs a C linker);
  # nothing of what the tests use.
  debootstrap --include=ca-certificates,git,gcc,libc6-dev,pkg-config \
    bookworm "$root" http://deb.debian.org/debian
fi
for tool in psql mariadb redis-server rabbitmq-server erlc chromium; do
  if chroot "$root" sh -c "command -v $tool" >/dev/null 2>&1; then
    echo "fresh-machine: note: $root already has $tool (not a fresh root: delete $dir for one)"
  fi
done

# Mounts left on the root by an earlier run that was killed (the mounts of
# a run are made in its own mount namespace and end with it; this is for
# older ones): unmounted before anything, so that deleting DIR never
# reaches through a bind mount of this machine's /dev.
if command -v findmnt >/dev/null 2>&1; then
  { findmnt -rn -o TARGET | grep -F "$root/" || true; } | sort -r | while read -r target; do
    umount -l "$target" 2>/dev/null || true
  done
fi

forward_before=$(cat /proc/sys/net/ipv4/ip_forward)
cleanup() {
  set +e
  iptables -t nat -D POSTROUTING -s "$net.0/24" ! -o "$host_if" -j MASQUERADE 2>/dev/null
  iptables -D FORWARD -i "$host_if" -j ACCEPT 2>/dev/null
  iptables -D FORWARD -o "$host_if" -j ACCEPT 2>/dev/null
  ip netns delete "$ns" 2>/dev/null
  ip link delete "$host_if" 2>/dev/null
  [ -n "${forward_before:-}" ] && sysctl -qw "net.ipv4.ip_forward=$forward_before"
}
if ip netns list | grep -qw "$ns"; then
  die "network namespace $ns exists: another run is going (or was killed: ip netns delete $ns)"
fi
trap cleanup EXIT

# The network: a veth pair to this machine, NAT out of it.
# shellcheck source=scripts/netns.sh
. scripts/netns.sh
netns_link "$ns" "$host_if" "$ns_if" "$net"
sysctl -qw net.ipv4.ip_forward=1
iptables -t nat -A POSTROUTING -s "$net.0/24" ! -o "$host_if" -j MASQUERADE
iptables -A FORWARD -i "$host_if" -j ACCEPT
iptables -A FORWARD -o "$host_if" -j ACCEPT

# The name server (systemd-resolved's stub on 127.0.0.53 is not reachable
# from the namespace: its upstream list instead), and this machine's name
# on loopback (RabbitMQ's node is rabbit@<hostname>).
resolv=/etc/resolv.conf
if grep -q '^nameserver 127\.' "$resolv" && [ -s /run/systemd/resolve/resolv.conf ]; then
  resolv=/run/systemd/resolve/resolv.conf
fi
cp -L "$resolv" "$root/etc/resolv.conf"
printf '127.0.0.1 localhost %s\n::1 localhost ip6-localhost\n' "$(hostname)" >"$root/etc/hosts"
# The certificate authorities this machine trusts, local ones included (a
# network that inspects TLS has its own, and cargo then needs it to reach
# crates.io); duplicates of Debian's own do no harm.
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$root/usr/local/share/ca-certificates/this-machine"
  awk -v dir="$root/usr/local/share/ca-certificates/this-machine" '
    /BEGIN CERTIFICATE/ { n++; file = sprintf("%s/%03d.crt", dir, n) }
    file { print > file }
    /END CERTIFICATE/ { close(file); file = "" }' /etc/ssl/certs/ca-certificates.crt
  chroot "$root" update-ca-certificates >/dev/null 2>&1 || true
fi

# The project: a clone of HEAD (what a user gets from git clone).
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "fresh-machine: note: the work tree has uncommitted changes; the root gets HEAD without them"
fi
rm -rf "$root/src"
git clone -q "$repo" "$root/src"
echo "fresh-machine: $(git -C "$root/src" log --oneline -1) in $root/src"

# Run in the namespace: a PID namespace (every process started ends with
# the run) and a mount namespace whose mounts (devices, /proc, the
# toolchain read-only) vanish with it.
inside='
  set -e
  root=$1
  shift
  bind() { mkdir -p "$2"; mount --bind "$1" "$2"; if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi; }
  mount --make-rprivate /
  bind /dev "$root/dev"
  bind /dev/pts "$root/dev/pts"
  mkdir -p "$root/dev/shm" && mount -t tmpfs shm "$root/dev/shm"
  mount -t proc proc "$root/proc"
  mount -t sysfs sys "$root/sys" 2>/dev/null || true
  bind "$RUSTUP_DIR" "$root/root/.rustup" ro
  bind "$CARGO_BIN_DIR" "$root/root/.cargo/bin" ro
  exec chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /src && \"\$@\"" fresh "$@"
'

log=$dir/test.log
echo "fresh-machine: running ${command[*]} (log: $log)"
start=$(date +%s)
set +e
RUSTUP_DIR=$rustup_home CARGO_BIN_DIR=$cargo_bin \
  ip netns exec "$ns" unshare --pid --fork --mount --propagation private \
  bash -c "$inside" inside "$root" "${command[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
echo "fresh-machine: exit $status after $(($(date +%s) - start)) s; log: $log"
exit "$status"
}
