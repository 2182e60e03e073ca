#!/usr/bin/env bash
# A local three-node RabbitMQ cluster on this machine, beside (never
# touching) the host broker rabbit@<host> on 5672:
#
#   node            AMQP             distribution
#   dlb1@localhost  127.0.0.1:5681   127.0.0.1:25681
#   dlb2@localhost  127.0.0.1:5682   127.0.0.1:25682
#   dlb3@localhost  127.0.0.1:5683   127.0.0.1:25683
#
# and the management API of each on http://127.0.0.1:1569N (N its number),
# which a fault aimed at the node hosting a strategy's queues asks.
#
# Each node has its own data, log, config and enabled-plugins file under
# $DELAYBENCH_RABBIT_CLUSTER_DIR (default /var/lib/delaybench/rabbitmq-cluster),
# and all three share one Erlang cookie of their own in that folder (not the
# host broker's /var/lib/rabbitmq/.erlang.cookie, so no command here can
# reach the host node by mistake). They share the host's epmd on 4369
# (distinct node names). The project's delayed-message plugin
# (rabbitmq-plugin/src) is compiled with erlc into the cluster folder and
# enabled on every node before it boots.
#
# Beside them, on its own (not clustered), a fourth node for the test of
# the management API over HTTPS (harness/tests/management_tls.rs), which the
# host broker does not enable as it is measured without it:
#
#   dlb9@localhost  AMQP 127.0.0.1:5689, AMQPS 127.0.0.1:5699,
#                   management API https://localhost:15699 (no plain HTTP),
#                   distribution 127.0.0.1:25689
#
# with the certificates of scripts/tls.sh (run `scripts/tls.sh setup` first).
#
# Usage: scripts/rabbitmq-cluster.sh start | stop | status | ctl NODE ARGS...
#                                  | management-start | management-stop
#   start   starts the stopped nodes, joins dlb2 and dlb3 to dlb1 and checks
#           that cluster_status lists three running nodes (idempotent:
#           running nodes are left alone and reported)
#   stop    stops the three nodes (their data stays)
#   status  prints rabbitmqctl cluster_status as seen from dlb1
#   ctl N   runs rabbitmqctl -n dlbN@localhost ARGS... with the cluster's
#           cookie, e.g. `scripts/rabbitmq-cluster.sh ctl 2 stop_app`
#
# Needs root (or write access to the cluster folder), RabbitMQ 3.10+ and erlc
# (Debian: rabbitmq-server, erlang-base). Connect with
#   amqp://guest:guest@127.0.0.1:5681,amqp://guest:guest@127.0.0.1:5682,amqp://guest:guest@127.0.0.1:5683
# (`guest` may log in over loopback only, which is all this cluster listens on).
set -euo pipefail

BASE=${DELAYBENCH_RABBIT_CLUSTER_DIR:-/var/lib/delaybench/rabbitmq-cluster}
HERE=$(cd "$(dirname "$0")/.." && pwd)
# The Debian wrappers in /usr/sbin switch to the rabbitmq user (and so to the
# host broker's cookie) and send output to the host broker's startup log;
# the scripts behind them take our environment as it is.
RABBIT_BIN=${RABBITMQ_BIN_DIR:-/usr/lib/rabbitmq/bin}
NODES=(1 2 3)
MANAGEMENT_NODE=9
TLS_DIR=${DELAYBENCH_TLS_DIR:-/var/lib/delaybench/tls}
PLUGIN=delaybench_delayed_exchange

say() { printf '[rabbitmq-cluster] %s\n' "$*"; }
die() { printf '[rabbitmq-cluster] error: %s\n' "$*" >&2; exit 1; }

node_name() { echo "dlb$1@localhost"; }
amqp_port() { echo $((5680 + $1)); }
dist_port() { echo $((25680 + $1)); }
amqps_port() { echo $((5690 + $1)); }
management_port() { echo $((15690 + $1)); }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The environment one node runs (and is controlled) with.
node_env() { # n
  local dir="$BASE/dlb$1"
  echo HOME="$BASE" \
    RABBITMQ_NODENAME="$(node_name "$1")" \
    RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
    RABBITMQ_CONFIG_FILE="$dir/rabbitmq" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
    RABBITMQ_PLUGINS_DIR="$BASE/plugins:$(plugins_dir)" \
    RABBITMQ_MNESIA_BASE="$dir/mnesia" \
    RABBITMQ_LOG_BASE="$dir/log" \
    RABBITMQ_PID_FILE="$dir/pid" \
    RABBITMQ_NODE_PORT="$(amqp_port "$1")" \
    RABBITMQ_DIST_PORT="$(dist_port "$1")" \
    ERL_EPMD_ADDRESS=127.0.0.1
}

plugins_dir() {
  local d
  d=$(ls -d /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins 2>/dev/null | sort -V | tail -n1)
  [ -n "$d" ] || die "no /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins: install RabbitMQ (Debian: apt-get install rabbitmq-server)"
  echo "$d"
}

ctl() { # n args...
  local n=$1
  shift
  env $(node_env "$n") "$RABBIT_BIN/rabbitmqctl" -n "$(node_name "$n")" "$@"
}

# Without its cookie no node of the cluster ever started here (and
# rabbitmqctl, finding no HOME, would leave an erl_crash.dump behind).
running() { [ -s "$BASE/.erlang.cookie" ] && ctl "$1" -q ping >/dev/null 2>&1; }
app_running() { ctl "$1" -q eval 'rabbit:is_running().' 2>/dev/null | grep -qx true; }

prepare_base() {
  command -v erlc >/dev/null || die "erlc not found (Debian: apt-get install erlang-base)"
  [ -x "$RABBIT_BIN/rabbitmq-server" ] || die "$RABBIT_BIN/rabbitmq-server not found (Debian: apt-get install rabbitmq-server)"
  mkdir -p "$BASE"
  if [ ! -s "$BASE/.erlang.cookie" ]; then
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-Z >"$BASE/.erlang.cookie"
  fi
  chmod 400 "$BASE/.erlang.cookie"
}

# Node n's folders, env file and enabled plugins ($2); its rabbitmq.conf
# is the common lines and then stdin.
node_files() { # n plugins
  local n=$1 dir="$BASE/dlb$1"
  mkdir -p "$dir/log" "$dir/mnesia"
  # Our own (empty) env file, so the host's /etc/rabbitmq/rabbitmq-env.conf
  # (NODENAME=rabbit@localhost) does not apply to these nodes.
  echo "# delaybench node dlb$n (scripts/rabbitmq-cluster.sh)" >"$dir/rabbitmq-env.conf"
  {
    echo "# delaybench node dlb$n (scripts/rabbitmq-cluster.sh)"
    echo "listeners.tcp.local = 127.0.0.1:$(amqp_port "$n")"
    echo "# Keep serving when the disk is nearly full on a test machine."
    echo "disk_free_limit.absolute = 50MB"
    cat
  } >"$dir/rabbitmq.conf"
  echo "[$2]." >"$dir/enabled_plugins"
}

prepare() {
  prepare_base
  build_plugin
  local n
  # The management API on each node (127.0.0.1:1569N, plain HTTP on
  # loopback): a fault aimed at the node hosting a strategy's queues asks
  # it where they are (`node = "queue-host"`).
  for n in "${NODES[@]}"; do
    node_files "$n" "$PLUGIN,rabbitmq_management" <<EOF
management.tcp.port = $(management_port "$n")
management.tcp.ip = 127.0.0.1
EOF
  done
}

# The management node: the management API over HTTPS only, and AMQP over
# TLS too, with the certificates of scripts/tls.sh (the node runs as root,
# so it reads their key where it is).
prepare_management() {
  prepare_base
  [ -s "$TLS_DIR/ca.pem" ] && [ -s "$TLS_DIR/server.pem" ] ||
    die "no certificates in $TLS_DIR: run \`scripts/tls.sh setup\` first (as root)"
  node_files "$MANAGEMENT_NODE" rabbitmq_management <<EOF
listeners.ssl.default = 127.0.0.1:$(amqps_port "$MANAGEMENT_NODE")
ssl_options.cacertfile = $TLS_DIR/ca.pem
ssl_options.certfile = $TLS_DIR/server.pem
ssl_options.keyfile = $TLS_DIR/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
management.ssl.port = $(management_port "$MANAGEMENT_NODE")
management.ssl.ip = 127.0.0.1
management.ssl.cacertfile = $TLS_DIR/ca.pem
management.ssl.certfile = $TLS_DIR/server.pem
management.ssl.keyfile = $TLS_DIR/server.key
EOF
}

management_start() {
  local n=$MANAGEMENT_NODE i
  prepare_management
  launch_node "$n"
  await_node "$n"
  for ((i = 0; i < 60; i++)); do port_open "$(management_port "$n")" && break; sleep 1; done
  port_open "$(management_port "$n")" ||
    die "$(node_name "$n") does not serve its management API on 127.0.0.1:$(management_port "$n"); see $BASE/dlb$n/log/"
  say "$(node_name "$n") up: amqps://guest:guest@localhost:$(amqps_port "$n")/%2f?cacertfile=$TLS_DIR/ca.pem&management=https://localhost:$(management_port "$n")"
}

# Compiles rabbitmq-plugin/src against the installed broker into
# $BASE/plugins/<plugin>-<vsn> (as rabbitmq-plugin/install.sh does for the
# host broker, which it also enables; this cluster only needs the files).
build_plugin() {
  local src="$HERE/rabbitmq-plugin/src" vsn common rabbit out modules
  vsn=$(sed -n 's/^VSN=//p' "$HERE/rabbitmq-plugin/install.sh")
  common=$(ls -d "$(plugins_dir)"/rabbit_common-* | head -n1)
  rabbit=$(ls -d "$(plugins_dir)"/rabbit-[0-9]* | head -n1)
  out="$BASE/plugins/$PLUGIN-$vsn"
  if [ -d "$out/ebin" ] && [ -z "$(find "$src" -newer "$out/ebin/$PLUGIN.app" -print -quit)" ]; then
    return 0
  fi
  say "compiling the delayed-message plugin $vsn into $out"
  rm -rf "$BASE/plugins"
  mkdir -p "$out/ebin"
  erlc -o "$out/ebin" +debug_info -pa "$common/ebin" -pa "$rabbit/ebin" \
    -I "$common/include" -I "$rabbit/include" -I "$src" "$src"/*.erl
  modules=$(cd "$out/ebin" && ls -1 ./*.beam | sed -e 's|^\./||' -e 's|\.beam$||' | paste -sd, -)
  sed -e '/^%%/d' -e "s/@VSN@/$vsn/" -e "s/@MODULES@/$modules/" \
    "$src/$PLUGIN.app.src" >"$out/ebin/$PLUGIN.app"
}

launch_node() { # n
  local n=$1
  if running "$n"; then
    say "$(node_name "$n") is already running (AMQP 127.0.0.1:$(amqp_port "$n"))"
    # Its app stopped by `stop_app` (a fault): start it again.
    if ! app_running "$n" && ctl "$n" -q eval 'rabbit:is_booting().' 2>/dev/null | grep -qx false; then
      say "starting the rabbit app on $(node_name "$n")"
      ctl "$n" -q start_app || true
    fi
    return 0
  fi
  port_open "$(amqp_port "$n")" && die "127.0.0.1:$(amqp_port "$n") is taken by another process; stop it first"
  say "starting $(node_name "$n") (AMQP 127.0.0.1:$(amqp_port "$n"), distribution $(dist_port "$n"), data $BASE/dlb$n)"
  (cd "$BASE" && env $(node_env "$n") "$RABBIT_BIN/rabbitmq-server" -detached) \
    >"$BASE/dlb$n/log/startup.log" 2>&1 || die "rabbitmq-server failed for dlb$n; see $BASE/dlb$n/log/"
}

# Waits for the rabbit app (a clustered node that was not the last one to
# stop waits for its peers' tables: so all are launched before any is awaited).
await_node() { # n
  local n=$1 i
  for ((i = 0; i < 120; i++)); do
    if running "$n"; then
      app_running "$n" && return 0
      # Up for a while but the app stopped (stop_app by a fault that never
      # ran start_app): start it again.
      if [ "$i" -ge 30 ] && ctl "$n" -q eval 'rabbit:is_booting().' 2>/dev/null | grep -qx false; then
        say "starting the rabbit app on $(node_name "$n")"
        ctl "$n" -q start_app || true
      fi
    fi
    sleep 1
  done
  die "$(node_name "$n") did not boot within 120s; see $BASE/dlb$n/log/"
}

# Nodes in dlb1's running_nodes.
running_nodes() {
  ctl 1 -q eval 'lists:sort(rabbit_nodes:all_running()).' 2>/dev/null | tr -d '[]\n ' | tr ',' '\n' | sed 's/^'"'"'//;s/'"'"'$//'
}

join() { # n
  local n=$1
  if ctl 1 -q eval 'lists:member('"'$(node_name "$n")'"', rabbit_nodes:all()).' 2>/dev/null | grep -qx true; then
    return 0
  fi
  say "joining $(node_name "$n") to $(node_name 1)"
  local out
  # The CLI logs feature-flag warnings on stderr while joining: shown only
  # when a step fails.
  for step in stop_app reset "join_cluster $(node_name 1)" start_app "await_startup --timeout 60"; do
    # shellcheck disable=SC2086
    out=$(ctl "$n" -q $step 2>&1) || die "rabbitmqctl -n $(node_name "$n") $step failed: $out"
  done
}

check_plugin() { # n
  ctl "$1" -q eval "rabbit_registry:lookup_module(exchange, 'x-delayed-message')." 2>/dev/null | grep -q "{ok,$PLUGIN}" \
    || die "x-delayed-message is not served by $PLUGIN on $(node_name "$1"); see $BASE/dlb$1/log/"
}

start() {
  prepare
  local n i
  # A node started before its management API was configured: restart it
  # with its new configuration (its data stays; it rejoins the others).
  for n in "${NODES[@]}"; do
    if running "$n" && app_running "$n" && ! port_open "$(management_port "$n")"; then
      say "restarting $(node_name "$n") to serve its management API on 127.0.0.1:$(management_port "$n")"
      ctl "$n" -q stop || true
      for ((i = 0; i < 60; i++)); do running "$n" || break; sleep 1; done
    fi
  done
  for n in "${NODES[@]}"; do launch_node "$n"; done
  for n in "${NODES[@]}"; do await_node "$n"; done
  for n in 2 3; do join "$n"; done
  local up
  up=$(running_nodes | grep -c '^dlb[123]@localhost$' || true)
  [ "$up" = 3 ] || { ctl 1 cluster_status >&2 || true; die "cluster_status shows $up of 3 nodes running"; }
  for n in "${NODES[@]}"; do check_plugin "$n"; done
  for n in "${NODES[@]}"; do
    for ((i = 0; i < 60; i++)); do port_open "$(management_port "$n")" && break; sleep 1; done
    port_open "$(management_port "$n")" ||
      die "$(node_name "$n") does not serve its management API on 127.0.0.1:$(management_port "$n"); see $BASE/dlb$n/log/"
  done
  say "cluster up: 3 running nodes ($(running_nodes | paste -sd' ' -)), $PLUGIN and the management API (127.0.0.1:15691-15693) on each"
  say "AMQP: amqp://guest:guest@127.0.0.1:5681,amqp://guest:guest@127.0.0.1:5682,amqp://guest:guest@127.0.0.1:5683"
}

stop() {
  local n
  for n in "${NODES[@]}"; do
    if running "$n"; then
      say "stopping $(node_name "$n")"
      ctl "$n" -q stop || true
    else
      say "$(node_name "$n") is not running"
    fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) ctl 1 cluster_status ;;
  management-start) management_start ;;
  management-stop)
    if running "$MANAGEMENT_NODE"; then
      say "stopping $(node_name "$MANAGEMENT_NODE")"
      ctl "$MANAGEMENT_NODE" -q stop || true
    else
      say "$(node_name "$MANAGEMENT_NODE") is not running"
    fi
    ;;
  ctl)
    [ $# -ge 3 ] || die "usage: $0 ctl NODE(1|2|3) RABBITMQCTL-ARGS..."
    n=$2
    shift 2
    case "$n" in 1 | 2 | 3) ;; *) die "NODE is 1, 2 or 3, not '$n'" ;; esac
    ctl "$n" "$@"
    ;;
  *)
    echo "usage: $0 start | stop | status | ctl NODE ARGS... | management-start | management-stop" >&2
    exit 2
    ;;
esac
