#!/usr/bin/env bash
# What a pending delayed message costs the plugin's store, measured inside
# the broker: N messages shaped like rabbit-delayed's (a 52-byte JSON body,
# a persistent message whose only header is x-delay, a 45-byte routing key)
# go straight into the store through insert/3, as the exchange's route
# callback puts them, all for one deadline an hour ahead, each with its
# x-delay computed in whole ms when it is sent (as a backlog's hand-off
# publishes them: their due times then fall on random microseconds of a
# millisecond or two, which decided how fast the store loads them). It prints, per message, what the VM
# grew by (erlang:memory(total)), the pending table's ETS memory and the
# off-heap binaries, and the journal's bytes per entry; then it restarts the
# broker's application (rabbitmqctl stop_app / start_app) and prints how
# long the store took to load the journal at start (info() loaded_ms) and
# the restart's own time; then it purges the messages.
#
# The whole broker restarts: run it only on a broker nothing else uses at
# the time, and not while tests or measurements run. The broker's growth
# during a real hand-off (messages through channels) is what a backlog run
# reports (`delaybench sweep --scenario backlog-1m --strategies
# rabbit-delayed`); this script isolates the store.
#
# Usage (as root, on the broker's host): store-footprint.sh [N]   (default 1000000)
# Node: DELAYBENCH_RABBIT_NODE, as the plugin's tests.
set -euo pipefail

N=${1:-1000000}
case "$N" in '' | *[!0-9]*) echo "store-footprint.sh: N must be a number, not '$N'" >&2; exit 2 ;; esac
ctl() { rabbitmqctl ${DELAYBENCH_RABBIT_NODE:+-n "$DELAYBENCH_RABBIT_NODE"} -q "$@"; }
# No $ in the expressions: rabbitmqctl passes them through a shell.
X='rabbit_misc:r(<<"/">>, exchange, <<"delaybench-store-footprint">>)'

ctl eval "$(cat <<ERL
X = $X, S = delaybench_delayed_store, N = $N,
RK = <<"dlb.r20261205_101033_rabbit_delayed_1000000.work">>,
P = {'P_basic', undefined, undefined, [{<<"x-delay">>, long, 3600000}], 2, undefined,
     undefined, undefined, undefined, undefined, undefined, undefined, undefined,
     undefined, undefined},
Due = os:system_time(microsecond) + 3600000000,
Msg = fun(I) ->
          Body = iolist_to_binary(io_lib:format(
                   "{\"order_id\":~b,\"expire_at_us\":~b}", [1000000 + I, Due])),
          M = rabbit_basic:message(X, RK, P, Body),
          setelement(4, M, rabbit_binary_generator:ensure_content_encoded(
                             element(4, M), rabbit_framing_amqp_0_9_1))
      end,
Mem = fun() -> garbage_collect(), {erlang:memory(total),
                                   ets:info(delaybench_delayed_pending, memory)
                                     * erlang:system_info(wordsize),
                                   erlang:memory(binary)} end,
Before = S:info(),
{T0, E0, B0} = Mem(),
Started = erlang:monotonic_time(millisecond),
lists:foreach(fun(I) ->
                      DelayMs = (Due - os:system_time(microsecond)) div 1000,
                      ok = S:insert(X, DelayMs, Msg(I))
              end, lists:seq(1, N)),
InsertMs = erlang:monotonic_time(millisecond) - Started,
ok = S:sync(),
{T1, E1, B1} = Mem(),
After = S:info(),
Entries = maps:get(journal_entries, After) - maps:get(journal_entries, Before),
Bytes = maps:get(file_size, After) - maps:get(file_size, Before),
io:format("~b messages inserted in ~b ms; per message: VM ~b B, ETS ~b B, "
          "off-heap binaries ~b B; journal ~b B per entry~n",
          [N, InsertMs, (T1 - T0) div N, (E1 - E0) div N, (B1 - B0) div N,
           Bytes div max(1, Entries)]).
ERL
)"

started=$(date +%s%N)
ctl stop_app >/dev/null
ctl start_app >/dev/null
restart_ms=$(( ($(date +%s%N) - started) / 1000000 ))
ctl eval "io:format(\"restart: ~b ms in all, the store loading ~b pending from its journal in ~b ms~n\", [$restart_ms, delaybench_delayed_store:count(), maps:get(loaded_ms, delaybench_delayed_store:info())])."
ctl eval "io:format(\"purged ~b~n\", [delaybench_delayed_store:purge($X)])."
