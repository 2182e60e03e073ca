#!/usr/bin/env bash
# Build the delaybench_delayed_exchange RabbitMQ plugin (the project's own
# x-delayed-message exchange type) with erlc against the installed broker,
# put it in the broker's plugins folder and enable it on the running broker.
#
# Idempotent: re-running it rebuilds, leaves an identical installed copy
# alone, replaces (disable, copy, enable) a changed one, and
# `rabbitmq-plugins enable` of an enabled plugin changes nothing.
#
# Needs root (rabbitmqctl / rabbitmq-plugins talk to the node with the
# cookie of root or rabbitmq), erlc (Debian: erlang-base, installed with
# rabbitmq-server) and a broker on this machine; starts it detached if it
# is not running.
#
# Environment:
#   PLUGIN_BUILD_DIR        where to compile (default: rabbitmq-plugin/_build)
#   PLUGINS_DIR             where to install (default: first folder of the
#                           broker's plugins_dir)
#   DELAYBENCH_RABBIT_NODE  the node to install on (passed to rabbitmqctl
#                           and rabbitmq-plugins as -n; default: theirs,
#                           i.e. RABBITMQ_NODENAME or rabbit@<host>). A
#                           node named here is never started by this
#                           script: start it yourself.
set -euo pipefail

NAME=delaybench_delayed_exchange
VSN=0.2.0
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_ROOT=${PLUGIN_BUILD_DIR:-$HERE/_build}

say() { printf '[install.sh] %s\n' "$*"; }
die() { printf '[install.sh] ERROR: %s\n' "$*" >&2; exit 1; }

NODE_ARGS=()
if [ -n "${DELAYBENCH_RABBIT_NODE:-}" ]; then
  NODE_ARGS=(-n "$DELAYBENCH_RABBIT_NODE")
fi
ctl() { rabbitmqctl "${NODE_ARGS[@]}" "$@"; }
plugins() { rabbitmq-plugins "${NODE_ARGS[@]}" "$@"; }

for tool in erlc rabbitmqctl rabbitmq-plugins; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found on PATH. Install the broker and Erlang compiler (Debian: apt-get install rabbitmq-server erlang-base) and re-run."
done
if [ "$(id -u)" != 0 ]; then
  say "warning: not root; rabbitmqctl may fail to reach the node (run as root)"
fi

# --- the broker must be running ------------------------------------------
if ! ctl -q status >/dev/null 2>&1; then
  [ -z "${DELAYBENCH_RABBIT_NODE:-}" ] || die "node $DELAYBENCH_RABBIT_NODE is not running; start it first"
  command -v rabbitmq-server >/dev/null 2>&1 || die "broker not running and rabbitmq-server not found"
  say "broker not running: starting it (rabbitmq-server -detached)"
  rabbitmq-server -detached || true
fi
say "waiting for the broker to finish booting"
ok=""
for _ in $(seq 1 60); do
  if ctl -q await_startup --timeout 10 >/dev/null 2>&1; then ok=1; break; fi
  sleep 2
done
[ -n "$ok" ] || die "the broker did not come up; see /var/log/rabbitmq/"

# Evaluate an Erlang expression on the node, printing a plain string result.
node_str() {
  ctl -q eval "lists:flatten(io_lib:format(\"~s\", [$1]))." | sed -e 's/^"//' -e 's/"$//'
}

RABBIT_COMMON=$(node_str 'code:lib_dir(rabbit_common)')
RABBIT=$(node_str 'code:lib_dir(rabbit)')
[ -f "$RABBIT_COMMON/include/rabbit.hrl" ] || die "rabbit.hrl not found under '$RABBIT_COMMON' (code:lib_dir(rabbit_common))"
[ -d "$RABBIT/ebin" ] || die "rabbit's ebin not found under '$RABBIT' (code:lib_dir(rabbit))"
# The same sources serve RabbitMQ 3.10-3.12 (#delivery, route/2) and
# 3.13+/4.x (message containers, route/3): the modules pick the API at run
# time (README, "RabbitMQ versions"). Say which one this broker has.
if [ -f "$RABBIT/ebin/mc.beam" ]; then
  say "broker API: message containers (mc, route/3; RabbitMQ >= 3.13)"
else
  say "broker API: #delivery / #basic_message records (route/2; RabbitMQ < 3.13)"
fi
if [ -z "${PLUGINS_DIR:-}" ]; then
  PLUGINS_DIR=$(node_str 'element(2, application:get_env(rabbit, plugins_dir))' | cut -d: -f1)
fi
[ -n "$PLUGINS_DIR" ] || die "could not read the broker's plugins_dir"
say "broker: $(ctl -q eval 'rabbit_misc:version().' | tr -d '"'), rabbit_common at $RABBIT_COMMON"

# --- compile ---------------------------------------------------------------
OUT="$BUILD_ROOT/$NAME-$VSN"
rm -rf "$OUT"
mkdir -p "$OUT/ebin"
say "compiling $HERE/src/*.erl -> $OUT/ebin"
erlc -o "$OUT/ebin" +debug_info \
  -pa "$RABBIT_COMMON/ebin" -pa "$RABBIT/ebin" \
  -I "$RABBIT_COMMON/include" -I "$RABBIT/include" -I "$HERE/src" \
  "$HERE"/src/*.erl
MODULES=$(cd "$OUT/ebin" && ls -1 ./*.beam | sed -e 's|^\./||' -e 's|\.beam$||' | paste -sd, -)
sed -e '/^%%/d' -e "s/@VSN@/$VSN/" -e "s/@MODULES@/$MODULES/" \
  "$HERE/src/$NAME.app.src" >"$OUT/ebin/$NAME.app"
erl -noshell -eval "{ok, [{application, $NAME, _}]} = file:consult(\"$OUT/ebin/$NAME.app\"), halt()." \
  || die "rendered $OUT/ebin/$NAME.app is not a valid application file"
say "built: $MODULES"

# --- install ---------------------------------------------------------------
DEST="$PLUGINS_DIR/$NAME-$VSN"
enabled() { plugins -q list --enabled --minimal 2>/dev/null | grep -qx "$NAME"; }
mkdir -p "$PLUGINS_DIR"
chmod 755 "$PLUGINS_DIR"
if [ -d "$DEST" ] && diff -rq "$OUT/ebin" "$DEST/ebin" >/dev/null 2>&1; then
  say "$DEST is up to date"
else
  if enabled; then
    say "installed copy differs: disabling the plugin to replace it"
    plugins disable "$NAME"
  fi
  # Disabling stops the application but leaves its modules loaded; unload
  # them so that enabling loads the new files.
  ctl -q eval "[begin code:purge(M), code:delete(M), code:purge(M) end
      || {M, _} <- code:all_loaded(), lists:prefix(\"delaybench_delayed_\", atom_to_list(M))], ok." >/dev/null
  # Other versions of this plugin would be duplicates for the broker.
  for old in "$PLUGINS_DIR/$NAME"-*; do
    [ -e "$old" ] && [ "$old" != "$DEST" ] && { say "removing old $old"; rm -rf "$old"; }
  done
  say "installing into $DEST"
  rm -rf "$DEST"
  cp -r "$OUT" "$DEST"
fi
chmod -R a+rX "$DEST"

# --- enable ----------------------------------------------------------------
say "enabling: rabbitmq-plugins enable $NAME"
plugins enable "$NAME"
# The type is registered by a boot step of the plugin: check it.
for _ in $(seq 1 30); do
  reg=$(ctl -q eval 'rabbit_registry:lookup_module(exchange, '"'"'x-delayed-message'"'"').' 2>/dev/null || true)
  case "$reg" in
    *"{ok,$NAME}"*) say "OK: exchange type x-delayed-message is served by $NAME"; break ;;
  esac
  reg=""
  sleep 1
done
[ -n "$reg" ] || die "x-delayed-message is not registered by $NAME; see the broker's log"

# --- carry over messages of the Mnesia store (plugin 0.1.0) -----------------
# Versions before 0.2.0 kept pending messages in the Mnesia table
# delaybench_delayed_message. If this node still has that table (RabbitMQ
# 3.x, upgraded from 0.1.0), move its records into the new store (same
# keys, so same due times) and delete the table. No-op everywhere else.
# Done here, not in the plugin, so that the plugin itself never calls Mnesia.
migrated=$(ctl -q eval '
  T = delaybench_delayed_message,
  Tabs = try mnesia:system_info(tables) catch _:_ -> [] end,
  case lists:member(T, Tabs) of
      true ->
          Recs = mnesia:dirty_match_object(T, mnesia:table_info(T, wild_pattern)),
          Added = delaybench_delayed_store:import(Recs),
          {atomic, ok} = mnesia:delete_table(T),
          {migrated, length(Recs), added, Added};
      false -> none
  end.' 2>&1) || die "could not carry over the old Mnesia store: $migrated"
case "$migrated" in
  none) ;;
  *) say "carried over the 0.1.0 Mnesia table into the new store and deleted it: $migrated" ;;
esac
say "store: $(ctl -q eval 'maps:with([file, pending, sync_interval_ms], delaybench_delayed_store:info()).' | tr -s ' \n' ' ')"
