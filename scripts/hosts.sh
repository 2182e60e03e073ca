#!/usr/bin/env bash
# Two "hosts" on this machine for a [hosts] run: network namespaces
# dlb-host-1 and dlb-host-2, each with a veth pair to this machine
# (10.231.N.1 here, 10.231.N.2 there) and a `delaybench agent` listening on
# 10.231.N.2:7710. The services listen on loopback only, so `delaybench
# forward` exposes them on 10.231.1.1 (PostgreSQL 15432, MariaDB 13306,
# Redis 16379, RabbitMQ 15672), and every part of the run uses those
# addresses. The namespaces share this machine's CPUs and clock; what they
# separate is the network stack and the processes.
#
# Usage: scripts/hosts.sh up | down | env
#   up    makes the namespaces, starts the forwarders and the agents (idempotent:
#         down first); logs in /tmp/dlb-hosts
#   down  stops them and removes the namespaces
#   env   prints DELAYBENCH_DB/DELAYBENCH_REDIS/DELAYBENCH_AMQP and the token
#         (eval "$(scripts/hosts.sh env)" before `delaybench run`)
# Needs root (ip netns) and a built delaybench (DELAYBENCH, default
# target/release/delaybench).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DELAYBENCH:-target/release/delaybench}
LOGS=/tmp/dlb-hosts
GW=10.231.1.1
TOKEN=${DELAYBENCH_AGENT_TOKEN:-dlb-hosts-local}
FORWARDS=("15432 127.0.0.1:5432" "13306 127.0.0.1:3306" "16379 127.0.0.1:6379" "15672 127.0.0.1:5672")

# shellcheck source=scripts/netns.sh
. scripts/netns.sh

die() { echo "error: $*" >&2; exit 1; }

down() {
  pkill -f "$BIN forward --listen $GW" 2>/dev/null || true
  for n in 1 2; do
    pkill -f "agent --listen 10.231.$n.2:7710" 2>/dev/null || true
    ip netns delete "dlb-host-$n" 2>/dev/null || true
    ip link delete "dlbh$n" 2>/dev/null || true
  done
}

up() {
  [ "$(id -u)" = 0 ] || die "hosts.sh makes network namespaces: run it as root"
  [ -x "$BIN" ] || die "$BIN is not built (cargo build --release -p delaybench)"
  down
  mkdir -p "$LOGS"
  for n in 1 2; do
    netns_link "dlb-host-$n" "dlbh$n" "dlbn$n" "10.231.$n"
  done
  for f in "${FORWARDS[@]}"; do
    set -- $f
    setsid nohup "$BIN" forward --listen "$GW:$1" --to "$2" > "$LOGS/forward-$1.log" 2>&1 &
  done
  for n in 1 2; do
    DELAYBENCH_AGENT_TOKEN=$TOKEN setsid nohup ip netns exec "dlb-host-$n" \
      "$(realpath "$BIN")" agent --listen "10.231.$n.2:7710" > "$LOGS/agent-$n.log" 2>&1 &
  done
  sleep 1
  for n in 1 2; do
    grep -q "listening on" "$LOGS/agent-$n.log" || die "agent $n did not start: $(cat "$LOGS/agent-$n.log")"
  done
  echo "hosts: agents on 10.231.1.2:7710 and 10.231.2.2:7710; services on $GW (eval \"\$(scripts/hosts.sh env)\")"
}

env_vars() {
  echo "export DELAYBENCH_AGENT_TOKEN=$TOKEN"
  echo "export DELAYBENCH_DB=postgres://root@$GW:15432/test"
  echo "export DELAYBENCH_REDIS=redis://$GW:16379"
  echo "export DELAYBENCH_AMQP=amqp://guest:guest@$GW:15672/%2f"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) env_vars ;;
  *) die "usage: scripts/hosts.sh up | down | env" ;;
esac
