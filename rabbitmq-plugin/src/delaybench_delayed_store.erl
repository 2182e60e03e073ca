%% Storage of pending delayed messages, without Mnesia.
%%
%% In RAM: one ETS table, ?ETS, an ordered_set keyed by {DueMicros, Seq},
%% so the first key is always the message due first; and ?XETS, the
%% exchanges of pending messages and their routing keys, interned: a
%% record names its exchange by a small integer (exchange_id/1), not by
%% its #resource{} (three terms and two binaries, 112 bytes in ETS per
%% message), and its routing keys by another (routing/2). It is public: channel processes insert into it directly from
%% route/2 and the scheduler reads and deletes from it, so a delayed
%% publish costs one ETS insert and two casts, and never waits for a disk.
%%
%% On disk: one journal, <node data dir>/delaybench_delayed/pending.log
%% (see data_dir/0), a disk_log of changes to the ETS table:
%% {exchange, XId, XName}, {routing, XId, RId, RKs}, {put, Record},
%% {del, Key} and {purge, XId}, appended in batches (an exchange's and a
%% routing's entry before any record naming them).
%% Replaying it from the start rebuilds the table. This module is also the
%% gen_server that owns both (started first by delaybench_delayed_sup); it
%% is the only process that opens, appends to or syncs the journal. At
%% start it opens the journal (disk_log cuts a torn tail if the node
%% stopped uncleanly), replays it into ETS, and compacts it if it holds
%% far more entries than messages; at a clean stop it appends what is
%% left in its mailbox and closes the journal.
%%
%% Why a journal, not a DETS copy of the table (0.2.0 until 2026-12):
%% DETS took about 100 us of CPU per insert or delete even in batches
%% (~9 500 a second on the 2-core test machine), so a burst of a million
%% delayed publishes took minutes to reach the file, and a storm of
%% releases queued its deletions ahead of every new publish. Appending
%% to a disk_log takes a few microseconds per entry (~450 000 a second
%% there) and replay reads ~1 000 000 entries a second.
%%
%% Compaction: the journal grows by an entry per put, release and purge.
%% When it holds more than twice as many entries as there are messages,
%% plus ?COMPACT_SLACK, a process of its own copies every message in ETS
%% to pending.log.compact while the store goes on appending to the
%% journal and keeps what it appends (the delta). When the copy is done,
%% the store appends the delta to it, syncs and closes it, and renames it
%% over pending.log (the rename is the commit: a crash before it leaves
%% the old journal whole, and the half-written file is deleted at the next
%% start). The copy reads ETS while it changes; replaying copy then delta
%% still gives ETS, because every change made after the copy began is in
%% the delta and replaying an entry twice changes nothing. Writers never
%% wait for a compaction: done in the store, one of 424 000 messages
%% during a storm of releases held every publisher for 18 s.
%%
%% Writers tell the server which key changed, the server appends what
%% makes the journal agree with ETS for that key:
%%   - insert: ETS insert, then cast {persist, Key}; the server appends the
%%     record from ETS if it is still in ETS (if it is not, it was
%%     already released or purged, so it must not reach the file);
%%   - delete: ETS delete, then cast {forget, Key}; the server appends
%%     {del, Key};
%%   - purge: ETS select_delete, then cast {purge, XName}.
%% ETS is the truth; whatever the order in which casts from different
%% processes arrive, replaying the journal gives exactly what ETS holds
%% once the mailbox is drained (keys are never reused, a del of a key not
%% yet put is a no-op, and a put of a key already released is never
%% appended).
%%
%% Durability (README, "Durability"): appended entries sit in disk_log's
%% buffer and the OS page cache; the server calls disk_log:sync/1 (which
%% writes the buffer and fsyncs the file) ?DEFAULT_SYNC_MS after the first
%% unsynced write, i.e. at least once a second while there are writes.
%% With the application environment `sync_interval_ms' set to 0 it syncs
%% whenever its mailbox is empty (group commit per burst). A clean stop
%% loses nothing; a crash of the VM or of the machine loses at most the
%% writes of the last interval.
-module(delaybench_delayed_store).
-behaviour(gen_server).

-include_lib("rabbit_common/include/rabbit.hrl").
-include("delaybench_delayed.hrl").

-export([start_link/0, insert/3, first/0, read/1, delete/1, purge/1,
         unpack/2, exchange_id/1, exchange_name/1,
         count/0, count/1, now_micros/0, due_of/1, sync/0, info/0,
         import/1, data_dir/0, file_path/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2,
         terminate/2, code_change/3]).

-define(SERVER, ?MODULE).
-define(DEFAULT_SYNC_MS, 1000).
-define(SUBDIR, "delaybench_delayed").
-define(FILE_NAME, "pending.log").
%% The DETS file of 0.2.0's first store, carried over once (init/1).
-define(OLD_FILE_NAME, "pending.dets").
-define(LOG, delaybench_delayed_journal).
-define(COMPACT_LOG, delaybench_delayed_journal_compact).
%% Writes appended to the journal together at most.
-define(BATCH, 2000).
%% Entries a compaction writes together.
-define(COMPACT_CHUNK, 2000).
%% The journal is compacted past 2 x messages + this many entries.
-define(COMPACT_SLACK, 100000).
%% How far the file may fall behind ETS, in writes waiting in the store's
%% mailbox, before publishers wait for it; and how often a publisher looks.
%% Without the bound a burst of delayed publishes (a million in 20 s) ran
%% hundreds of thousands of writes ahead of the file: a crash lost them all
%% and a clean stop, draining them within the supervisor's shutdown time,
%% was killed halfway and lost two thirds of them.
-define(MAX_BEHIND, 20000).
-define(CHECK_EVERY, 64).
-define(CHECK_KEY, '$delaybench_delayed_inserts').
%% How long a publisher waits for the file at most, ms; past it the
%% publish goes on (the store is stuck or stopping, and the bound is lost).
-define(WAIT_MS, 30000).

-record(state, {file :: string(),
                sync_ms :: non_neg_integer(),
                %% Entries in the journal (since its last compaction).
                entries = 0 :: non_neg_integer(),
                %% A compaction under way: its copying process, when it
                %% began (ms), and what the store appended since (newest
                %% first) with their count.
                compacting = undefined ::
                  undefined | {pid(), integer(), [term()], non_neg_integer()},
                compactions = 0 :: non_neg_integer(),
                %% The last compaction: messages copied, entries appended
                %% meanwhile, milliseconds.
                last_compaction = none :: none | map(),
                timer = undefined :: undefined | reference(),
                dirty = false :: boolean(),
                writes = 0 :: non_neg_integer(),
                syncs = 0 :: non_neg_integer(),
                last_sync_us = undefined :: undefined | integer(),
                %% The most writes seen waiting in the mailbox.
                max_behind = 0 :: non_neg_integer(),
                %% The id the next interned exchange gets.
                next_xid = 1 :: pos_integer(),
                %% How long loading the journal took at start, ms.
                loaded_ms = 0 :: non_neg_integer()}).

start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%%----------------------------------------------------------------------------
%% API used by the exchange and the scheduler (any process)

%% Store Msg, published to XName, to be routed DelayMs from now, and tell
%% the scheduler about the new due time. Fails the publish with
%% INTERNAL_ERROR when the store is not running (plugin stopping).
insert(XName, DelayMs, Msg) when is_integer(DelayMs), DelayMs > 0 ->
    Due = whole_ms_up(now_micros() + DelayMs * 1000),
    Key = {Due, next_seq()},
    {RKs, Head, Body} = pack(XName, Msg),
    try
        XId = exchange_id(XName),
        true = ets:insert(?ETS, #delaybench_delayed_message{
                                   key = Key, exchange = XId,
                                   routing = routing(XId, RKs),
                                   head = Head, body = Body})
    catch
        error:badarg -> not_running();
        exit:{noproc, _} -> not_running()
    end,
    gen_server:cast(?SERVER, {persist, Key}),
    %% The scheduler first: a publisher that waits below must not hold
    %% back the release of what it already stored.
    delaybench_delayed_scheduler:notify(Due),
    keep_up().

not_running() ->
    rabbit_misc:protocol_error(
      internal_error, "delayed message store (~s) is not running", [?MODULE]).

%% A key's second part: unique across the node's restarts, as the journal
%% needs (a key is never reused while it may still be in the file). The
%% store sets the base above every number its journal holds (init/1).
next_seq() ->
    persistent_term:get({?MODULE, seq_base}, 0) +
        erlang:unique_integer([monotonic, positive]).

%% The interned id of exchange XName; the store interns it (and journals
%% it before any record that names it) the first time.
exchange_id(XName) ->
    case ets:lookup(?XETS, XName) of
        [{_, XId}] -> XId;
        [] -> gen_server:call(?SERVER, {intern, XName}, ?WAIT_MS)
    end.

%% The routing keys RKs of a message published to exchange XId as a
%% record keeps them: their interned id for this exchange (the store
%% interns a new set of keys, up to ?MAX_ROUTINGS per exchange), or past
%% that a binary of them. Why: a message's routing keys are most often one
%% of a few (rabbit-delayed's are its work queues' names, 45 bytes here),
%% and kept in each record they took the record's binary past the 64 bytes
%% ETS holds inline: a million pending held 155 bytes each of off-heap
%% binaries (results/backlog/20261205-101033-backlog-1m, broker memory 398
%% bytes per pending order).
routing(_XId, undefined) ->
    undefined;
routing(XId, RKs) ->
    case ets:lookup(?XETS, {XId, RKs}) of
        [{_, RId}] ->
            RId;
        [] ->
            case routings_of(XId) >= ?MAX_ROUTINGS of
                true ->
                    encode_routing(RKs);
                false ->
                    gen_server:call(?SERVER, {intern_routing, XId, RKs},
                                    ?WAIT_MS)
            end
    end.

%% How many sets of routing keys exchange XId has interned.
routings_of(XId) ->
    case ets:lookup(?XETS, {routings, XId}) of
        [{_, N}] -> N;
        [] -> 0
    end.

encode_routing(RKs) ->
    iolist_to_binary([<<(length(RKs)):16>>,
                      [<<(byte_size(RK)):16, RK/binary>> || RK <- RKs]]).

%% The routing keys a record keeps, or error once its exchange was purged.
routing_keys_of(XId, RId) when is_integer(RId) ->
    case ets:lookup(?XETS, {XId, RId}) of
        [{_, RKs}] -> {ok, RKs};
        [] -> error
    end;
routing_keys_of(_XId, <<N:16, Rest/binary>>) ->
    {ok, routing_keys(N, Rest, [])}.

routing_keys(0, <<>>, RKs) ->
    lists:reverse(RKs);
routing_keys(N, <<L:16, RK:L/binary, Rest/binary>>, RKs) ->
    routing_keys(N - 1, Rest, [RK | RKs]).

%% {ok, XName} of an interned id, or error once its exchange was purged.
exchange_name(XId) ->
    case ets:lookup(?XETS, XId) of
        [{_, XName}] -> {ok, XName};
        [] -> error
    end.

%% A message as the store keeps it, in ETS and in the journal: {Head,
%% Body}, with the decoded properties left out as RabbitMQ's own message
%% store leaves them out (the properties stay in their wire form, and
%% whatever reads them decodes them again).
%%
%% Why: kept as the published term, a message held every part of it as a
%% term of its own in ETS (the decoded #'P_basic'{} and its headers table
%% beside the same properties in wire form, the exchange and queue
%% resources, the routing keys), and its body as a sub-binary of the
%% socket's read buffer, holding that buffer alive: the broker grew by
%% about 1 200 bytes per pending message (results/backlog/20261204-140328-
%% backlog-1m). Packing costs a term_to_binary/1 on publish and a
%% binary_to_term/1 on release, a few microseconds each.
%%
%% A RabbitMQ 3.10-3.12 message published to the record's own exchange
%% is kept as its routing keys (see routing/2) and two binaries: the head,
%% its persistence flag and properties in wire form; and its body. Release
%% rebuilds the #basic_message{} around them with the record's exchange
%% and a fresh id (the id only names one routing of the message to its
%% queues). Why binaries and no term: ETS keeps a binary of up to 64 bytes
%% inside the record, and a longer one outside it behind a 48-byte
%% reference, so the head and a short body cost their bytes and 16 each
%% (pack/2 returns {RKs, Head, Body}, RKs undefined for a message packed
%% whole). Kept as one term
%% ({compact, term_to_binary({RKs, PropsBin, Fragments, Id, Persistent})},
%% 2e89561) with the exchange's #resource{} and a key of {Due, Seq, Guid},
%% a million of rabbit-delayed's pending held the broker at 585 bytes each
%% (results/backlog/20261205-092833-backlog-1m); packed whole before that,
%% 760. Anything else (a 3.13+/4.x message container, routing keys longer
%% than 65 535 bytes, properties with no wire form) is packed whole.
pack(XName, #basic_message{exchange_name = XName, routing_keys = RKs,
                           is_persistent = Persistent,
                           content = Content} = Msg) ->
    case rabbit_binary_parser:clear_decoded_content(Content) of
        #content{class_id = 60, properties_bin = PropsBin,
                 protocol = rabbit_framing_amqp_0_9_1,
                 payload_fragments_rev = Fragments}
          when is_binary(PropsBin), length(RKs) < 65536 ->
            case lists:all(fun(RK) -> byte_size(RK) < 65536 end, RKs) of
                true ->
                    Flag = case Persistent of true -> 1; false -> 0 end,
                    %% Copies: the fragments and the routing keys are
                    %% sub-binaries of the socket's read buffer, which they
                    %% would hold alive.
                    Body = binary:copy(
                             iolist_to_binary(lists:reverse(Fragments))),
                    {[binary:copy(RK) || RK <- RKs],
                     <<Flag:8, PropsBin/binary>>, Body};
                false ->
                    pack_whole(Msg)
            end;
        _ ->
            pack_whole(Msg)
    end;
pack(_XName, Msg) ->
    pack_whole(Msg).

pack_whole(Msg) ->
    {undefined, {packed, term_to_binary(prepare_to_store(Msg))}, undefined}.

%% The message a stored record of exchange XName holds, as it was
%% published, ready to route.
unpack(XName, #delaybench_delayed_message{exchange = XId, routing = R,
                                          head = <<Flag:8, PropsBin/binary>>,
                                          body = Body}) ->
    RKs = case routing_keys_of(XId, R) of
              {ok, Keys} -> Keys;
              error -> erlang:error(routing_keys_forgotten)
          end,
    basic_message(XName, RKs, PropsBin, [Body], rabbit_guid:gen(),
                  Flag =:= 1);
unpack(_XName, #delaybench_delayed_message{head = {packed, Bin}}) ->
    decoded(binary_to_term(Bin)).

%% The message a record of an earlier build holds (#delaybench_delayed_
%% message{} with the fields key, exchange, message): {compact, Bin}
%% (2e89561), {packed, Bin} (3819e59), or before that the message itself.
legacy_message(XName, {compact, Bin}) ->
    {RKs, PropsBin, Fragments, Id, Persistent} = binary_to_term(Bin),
    basic_message(XName, RKs, PropsBin, Fragments, Id, Persistent);
legacy_message(_XName, {packed, Bin}) -> decoded(binary_to_term(Bin));
legacy_message(_XName, Msg) -> Msg.

%% A RabbitMQ 3.10-3.12 message rebuilt around its wire-form properties,
%% ready to route.
basic_message(XName, RKs, PropsBin, Fragments, Id, Persistent) ->
    Content = #content{class_id = 60, properties = none,
                       properties_bin = PropsBin,
                       protocol = rabbit_framing_amqp_0_9_1,
                       payload_fragments_rev = Fragments},
    decoded(#basic_message{exchange_name = XName, routing_keys = RKs,
                           content = Content, id = Id,
                           is_persistent = Persistent}).

%% A record of an earlier build, {delaybench_delayed_message, Key, XName,
%% Message}, as this build keeps it, its exchange interned as XId: the key
%% {Due, Seq, Guid} becomes {Due, {Seq, Guid}} (the same order among due
%% times, and an old {del, Key} still finds it: legacy_key/1), the message
%% is packed again, its routing keys kept in the record (not interned).
upgrade({delaybench_delayed_message, Key, XName = #resource{}, Stored},
        XId) ->
    {RKs, Head, Body} = pack(XName, legacy_message(XName, Stored)),
    Routing = case RKs of
                  undefined -> undefined;
                  _ -> encode_routing(RKs)
              end,
    #delaybench_delayed_message{key = legacy_key(Key), exchange = XId,
                                routing = Routing, head = Head, body = Body}.

legacy_key({Due, Seq, Guid}) -> {Due, {Seq, Guid}};
legacy_key(Key) -> Key.

%% RabbitMQ 3.x's headers exchange reads the decoded properties without
%% decoding them first (rabbit_exchange_type_headers:route/2), so they are
%% decoded again from their wire form before the message is routed.
decoded(#basic_message{content = Content} = Msg) ->
    Msg#basic_message{
      content = rabbit_binary_parser:ensure_content_decoded(Content)};
decoded(Msg) ->
    Msg.

%% RabbitMQ 3.10-3.12: #basic_message{} whose #content{} may hold the
%% properties twice (decoded, and as the wire binary); the decoded form
%% goes, as rabbit_msg_store does before a write. 3.13+/4.x: a message
%% container, prepared for storage by mc:prepare/2 where it exists.
prepare_to_store(#basic_message{content = Content} = Msg) ->
    Msg#basic_message{
      content = rabbit_binary_parser:clear_decoded_content(Content)};
prepare_to_store(Msg) ->
    case erlang:function_exported(mc, prepare, 2) of
        true -> mc:prepare(store, Msg);
        false -> Msg
    end.

%% Every ?CHECK_EVERY inserts of a process, if more than ?MAX_BEHIND
%% writes wait for the file, the publisher waits until the store has taken
%% in every write cast before this call (the call is queued behind them):
%% the channel, then the client, slow to what the file takes, as RabbitMQ's
%% own flow control slows them to what a queue takes.
keep_up() ->
    N = case get(?CHECK_KEY) of undefined -> 0; C -> C end,
    case N + 1 >= ?CHECK_EVERY of
        false ->
            put(?CHECK_KEY, N + 1),
            ok;
        true ->
            put(?CHECK_KEY, 0),
            case whereis(?SERVER) of
                undefined ->
                    ok;
                Pid ->
                    case erlang:process_info(Pid, message_queue_len) of
                        {message_queue_len, L} when L > ?MAX_BEHIND ->
                            try gen_server:call(Pid, caught_up, ?WAIT_MS) of
                                ok -> ok
                            catch
                                exit:_ -> ok
                            end;
                        _ ->
                            ok
                    end
            end
    end.

%% The key of the message due first, or '$end_of_table'.
first() ->
    ets:first(?ETS).

read(Key) ->
    ets:lookup(?ETS, Key).

delete(Key) ->
    true = ets:delete(?ETS, Key),
    gen_server:cast(?SERVER, {forget, Key}).

%% Delete every pending message of exchange XName, and forget its id;
%% returns how many. A publish racing the deletion may still store a record
%% under the forgotten id: it is dropped when due, its exchange not found
%% (a later exchange of the same name gets a new id).
purge(XName) ->
    case ets:lookup(?XETS, XName) of
        [] ->
            0;
        [{_, XId}] ->
            N = drop_exchange(XId),
            gen_server:cast(?SERVER, {purge, XId}),
            N
    end.

%% Forgets exchange XId's ids (first, so a later exchange of the same name
%% gets new ones), then deletes its records; returns how many.
drop_exchange(XId) ->
    case ets:lookup(?XETS, XId) of
        [{_, XName}] -> true = ets:delete_object(?XETS, {XName, XId});
        [] -> ok
    end,
    true = ets:delete(?XETS, XId),
    true = ets:match_delete(?XETS, {{XId, '_'}, '_'}),
    true = ets:delete(?XETS, {routings, XId}),
    ets:select_delete(?ETS, of_exchange(XId)).

of_exchange(XId) ->
    [{#delaybench_delayed_message{exchange = XId, _ = '_'}, [], [true]}].

%% Number of pending messages (all exchanges of this node).
count() ->
    ets:info(?ETS, size).

%% Number of pending messages of one exchange (scans the table).
count(XName) ->
    case ets:lookup(?XETS, XName) of
        [] -> 0;
        [{_, XId}] -> ets:select_count(?ETS, of_exchange(XId))
    end.

%% The clock of due times: the operating system's wall clock, read directly.
%% Not erlang:system_time/1: after the OS clock steps forward while the node
%% runs (a VM resumed from a snapshot, a first NTP sync), Erlang's time
%% correction slews its clock up to 1 % fast until it has caught up, which
%% can take many minutes; its timers and system_time then run ahead of real
%% time, and a 500 ms x-delay was released 496.8 ms after its publish (CI,
%% stop 32; reproduced by `date -s "+5 seconds"` with the broker up). Read
%% against the OS clock, a timer that fires early finds nothing due and is
%% re-armed for the rest. A step of the OS clock itself still moves due
%% times, as it moves the databases' now() the other strategies compare
%% deadlines with.
now_micros() ->
    os:system_time(microsecond).

due_of({Due, _Seq}) -> Due.

%% A due time rounded up to a whole millisecond (still in microseconds, so
%% records of earlier builds compare with new ones). Why: x-delay is in
%% whole ms, so publishers of one deadline (an order's fixed payment
%% window, the backlog hand-off) send delays that put their due times at
%% random microseconds of the same millisecond or two; in an ordered_set
%% of millions each such insert, and each entry replayed from the journal
%% at start, lands at a random place in the tree and misses the CPU cache
%% on most of its levels. Rounded, they share a due time and go in at its
%% end in Seq order. Rounding up: never released early. Measured
%% (results/plugin-footprint/20261205.md): a table alone took 0.87 us an
%% insert at 1M and 1.34 at 10M with such due times, 0.53 and 0.81 rounded
%% (scripts/ets-insert-order.escript); the store loading 1M so published
%% took 1968 ms before, 1301 ms rounded (scripts/store-footprint.sh).
whole_ms_up(Us) ->
    ((Us + 999) div 1000) * 1000.

%% Write everything cast so far by the caller, and fsync the file.
sync() ->
    gen_server:call(?SERVER, sync, infinity).

%% Where and how the store keeps its file, for rabbitmqctl eval.
info() ->
    gen_server:call(?SERVER, info, infinity).

%% Adds already-built records (e.g. from an older store), keeping their
%% keys, and syncs; returns how many were added. Used by install.sh to
%% carry over messages left in the Mnesia table of plugin versions before
%% 0.2.0. Records of earlier builds are upgraded (upgrade/2).
import(Recs) when is_list(Recs) ->
    gen_server:call(?SERVER, {import, Recs}, infinity).

%% The node's data directory on every supported release:
%% rabbit:data_dir/0 where it exists (3.13, 4.x; not 3.10); on 3.10 the same
%% directory (RABBITMQ_MNESIA_DIR, e.g.
%% /var/lib/rabbitmq/mnesia/rabbit@localhost) is the `dir' environment of
%% the mnesia application, which rabbit's prelaunch sets whether or not
%% Mnesia is used.
data_dir() ->
    _ = code:ensure_loaded(rabbit),
    case erlang:function_exported(rabbit, data_dir, 0) of
        true ->
            rabbit:data_dir();
        false ->
            case application:get_env(mnesia, dir) of
                {ok, Dir} -> Dir;
                undefined -> exit({no_data_dir, ?MODULE})
            end
    end.

file_path() ->
    filename:join([data_dir(), ?SUBDIR, ?FILE_NAME]).

%%----------------------------------------------------------------------------
%% gen_server: owns ?ETS and the journal

init([]) ->
    process_flag(trap_exit, true),
    %% A burst queues many writes here; kept off the heap, they are not
    %% copied by every garbage collection of this process.
    process_flag(message_queue_data, off_heap),
    File = file_path(),
    ok = filelib:ensure_dir(File),
    _ = ets:new(?ETS, [ordered_set, public, named_table,
                       {keypos, #delaybench_delayed_message.key},
                       {read_concurrency, true},
                       {write_concurrency, true}]),
    _ = ets:new(?XETS, [set, public, named_table, {read_concurrency, true}]),
    %% A compaction cut short before its rename: the journal is whole.
    _ = file:delete(compact_path(File)),
    Started = erlang:monotonic_time(millisecond),
    #{entries := Entries, legacy := Legacy} = Replayed = open_journal(File),
    SyncMs = application:get_env(delaybench_delayed_exchange,
                                 sync_interval_ms, ?DEFAULT_SYNC_MS),
    S0 = #state{file = File, sync_ms = SyncMs, entries = Entries},
    {Carried, NextXId} = carry_over_dets(File, maps:get(next_xid, Replayed)),
    %% New keys above every key the journal held (next_seq/0).
    persistent_term:put({?MODULE, seq_base}, maps:get(max_seq, Replayed)),
    S1 = case {Carried, Legacy} of
             {0, 0} ->
                 S0#state{next_xid = NextXId};
             {0, _} ->
                 %% Records of an earlier build, upgraded in ETS: the
                 %% journal is rewritten as this build reads it, before
                 %% any new entry could follow the old ones.
                 compact_now(S0#state{next_xid = NextXId});
             _ ->
                 S2 = compact_now(S0#state{next_xid = NextXId}),
                 ok = set_dets_aside(File),
                 S2
         end,
    LoadedMs = erlang:monotonic_time(millisecond) - Started,
    rabbit_log:info("delaybench_delayed_exchange: ~b pending delayed "
                    "message(s) loaded from ~ts (~b journal entries) in "
                    "~b ms", [count(), File, Entries, LoadedMs]),
    {ok, maybe_compact(S1#state{loaded_ms = LoadedMs})}.

%% Opens the journal and replays it into ETS and ?XETS; returns its entry
%% count, how many were an earlier build's, the largest key number and the
%% next exchange id.
open_journal(File) ->
    Opts = [{name, ?LOG}, {file, File}, {type, halt}, {format, internal},
            {repair, true}],
    Start = #{entries => 0, legacy => 0, max_seq => 0, next_xid => 1},
    case disk_log:open(Opts) of
        {ok, ?LOG} ->
            replay(start, Start);
        {repaired, ?LOG, {recovered, _}, {badbytes, Bad}} ->
            rabbit_log:warning("delaybench_delayed_exchange: ~ts was not "
                               "closed cleanly; ~b byte(s) of a torn tail "
                               "cut", [File, Bad]),
            replay(start, Start);
        {error, Reason} ->
            %% Unreadable even after repair: keep it for inspection and
            %% start empty rather than keep the exchange type unusable.
            Aside = File ++ ".unreadable-" ++
                integer_to_list(erlang:system_time(second)),
            rabbit_log:error("delaybench_delayed_exchange: cannot open ~ts "
                             "(~p); moved to ~ts, starting with no pending "
                             "messages", [File, Reason, Aside]),
            ok = file:rename(File, Aside),
            {ok, ?LOG} = disk_log:open(Opts),
            Start
    end.

replay(Cont, Acc) ->
    case disk_log:chunk(?LOG, Cont) of
        eof ->
            Acc;
        {error, Reason} ->
            exit({journal_unreadable, file_path(), Reason});
        {Cont1, Terms} ->
            replay(Cont1, lists:foldl(fun replay_entry/2, Acc, Terms));
        {Cont1, Terms, _BadBytes} ->
            replay(Cont1, lists:foldl(fun replay_entry/2, Acc, Terms))
    end.

replay_entry(Entry, Acc = #{entries := N}) ->
    replayed(Entry, Acc#{entries := N + 1}).

replayed({exchange, XId, XName}, Acc = #{next_xid := Next}) ->
    true = ets:insert(?XETS, [{XName, XId}, {XId, XName}]),
    Acc#{next_xid := max(Next, XId + 1)};
replayed({routing, XId, RId, RKs}, Acc) ->
    add_routing(XId, RId, RKs),
    Acc;
replayed({put, Rec = #delaybench_delayed_message{key = {_, Seq}}},
         Acc = #{max_seq := Max}) ->
    true = ets:insert(?ETS, Rec),
    Acc#{max_seq := max_seq(Seq, Max)};
replayed({put, Old = {delaybench_delayed_message, _, XName, _}},
         Acc = #{legacy := L, next_xid := Next}) ->
    {XId, Next1} = intern_local(XName, Next),
    true = ets:insert(?ETS, upgrade(Old, XId)),
    Acc#{legacy := L + 1, next_xid := Next1};
replayed({del, Key}, Acc = #{max_seq := Max}) ->
    true = ets:delete(?ETS, legacy_key(Key)),
    Acc#{max_seq := max_seq(element(2, Key), Max)};
replayed({purge, XId}, Acc) when is_integer(XId) ->
    _ = drop_exchange(XId),
    Acc;
replayed({purge, XName = #resource{}}, Acc = #{legacy := L}) ->
    %% An earlier build's purge, by name.
    _ = [drop_exchange(XId) || {_, XId} <- ets:lookup(?XETS, XName)],
    Acc#{legacy := L + 1}.

%% Interns XName in ?XETS (Next is the id it gets if it is new) without
%% journaling it; returns its id and the next free one. intern/2 journals a
%% new one; while the store starts the caller rewrites the journal instead,
%% before anything else is appended.
intern_local(XName, Next) ->
    case ets:lookup(?XETS, XName) of
        [{_, XId}] ->
            {XId, Next};
        [] ->
            true = ets:insert(?XETS, [{XName, Next}, {Next, XName}]),
            {Next, Next + 1}
    end.

max_seq(Seq, Max) when is_integer(Seq) -> max(Seq, Max);
max_seq(_LegacySeq, Max) -> Max.

%% Records left in 0.2.0's DETS file go into ETS, upgraded (the caller
%% compacts them into the journal, then sets the file aside); returns how
%% many, and the next free exchange id.
carry_over_dets(File, NextXId) ->
    Old = filename:join(filename:dirname(File), ?OLD_FILE_NAME),
    case filelib:is_regular(Old) of
        false ->
            {0, NextXId};
        true ->
            {ok, T} = dets:open_file(make_ref(),
                                     [{file, Old}, {type, set},
                                      {keypos, #delaybench_delayed_message.key},
                                      {repair, true}]),
            {N, Next} =
                dets:foldl(
                  fun(Rec = {_, _, XName, _}, {K, Next0}) ->
                          {XId, Next1} = intern_local(XName, Next0),
                          true = ets:insert(?ETS, upgrade(Rec, XId)),
                          {K + 1, Next1}
                  end, {0, NextXId}, T),
            ok = dets:close(T),
            rabbit_log:info("delaybench_delayed_exchange: ~b message(s) "
                            "carried over from ~ts", [N, Old]),
            %% An empty file has nothing the journal must hold first.
            N =:= 0 andalso set_dets_aside(File),
            {N, Next}
    end.

%% Once the journal holds what the DETS file held (a compaction committed),
%% the file is set aside; before that, a crash must find it again.
set_dets_aside(File) ->
    Old = filename:join(filename:dirname(File), ?OLD_FILE_NAME),
    ok = file:rename(Old, Old ++ ".carried-over").

handle_call(sync, _From, S) ->
    {reply, ok, do_sync(S)};
handle_call({intern, XName}, _From, S) ->
    {XId, S1} = intern(XName, S),
    {reply, XId, S1, timeout(S1)};
handle_call({intern_routing, XId, RKs}, _From, S) ->
    {Routing, S1} = intern_routing(XId, RKs, S),
    {reply, Routing, S1, timeout(S1)};
handle_call(caught_up, _From, S) ->
    %% Every write cast before the call has been applied (see keep_up/0).
    {reply, ok, S, timeout(S)};
handle_call(info, _From, S = #state{file = File, sync_ms = SyncMs,
                                    entries = E, compactions = C,
                                    writes = W, syncs = N,
                                    last_sync_us = Last,
                                    max_behind = Behind}) ->
    Reply = #{file => File,
              pending => count(),
              journal_entries => E,
              file_size => filelib:file_size(File),
              compactions => C,
              compacting => S#state.compacting =/= undefined,
              last_compaction => S#state.last_compaction,
              sync_interval_ms => SyncMs,
              writes => W,
              syncs => N,
              last_sync_us => Last,
              max_behind => Behind,
              loaded_ms => S#state.loaded_ms},
    {reply, Reply, S, timeout(S)};
handle_call({import, Recs}, _From, S0) ->
    {Upgraded, S} = lists:mapfoldl(
                      fun(Rec = #delaybench_delayed_message{}, SAcc) ->
                              {Rec, SAcc};
                         (Old = {_, _, XName, _}, SAcc) ->
                              {XId, SAcc1} = intern(XName, SAcc),
                              {upgrade(Old, XId), SAcc1}
                      end, S0, Recs),
    New = [R || R = #delaybench_delayed_message{key = K} <- Upgraded,
                not ets:member(?ETS, K)],
    true = ets:insert(?ETS, New),
    S1 = do_sync(append([{put, R} || R <- New], S)),
    [delaybench_delayed_scheduler:notify(due_of(K))
     || #delaybench_delayed_message{key = K} <- New],
    {reply, length(New), S1};
handle_call(_Req, _From, S) ->
    {reply, {error, unknown_call}, S, timeout(S)}.

handle_cast(Msg, S = #state{max_behind = Max}) ->
    {message_queue_len, Behind} = erlang:process_info(self(), message_queue_len),
    %% Take this write and those waiting behind it as one batch: one
    %% disk_log:log_terms/2 of many entries costs far less than many of one.
    S1 = apply_writes(take_batch([Msg], ?BATCH - 1),
                      S#state{max_behind = max(Max, Behind)}),
    S2 = maybe_compact(S1),
    {noreply, S2, timeout(S2)}.

handle_info({timeout, Ref, sync}, S = #state{timer = Ref}) ->
    {noreply, do_sync(S#state{timer = undefined})};
handle_info(timeout, S) ->
    %% sync_interval_ms = 0: the mailbox is empty, sync the burst.
    {noreply, do_sync(S)};
handle_info({copied, Pid, N}, S = #state{compacting = {Pid, _, _, _}}) ->
    S1 = finish_compaction(N, S),
    {noreply, S1, timeout(S1)};
handle_info({'EXIT', Pid, Reason}, S = #state{compacting = {Pid, _, _, _}})
  when Reason =/= normal ->
    %% The copy failed: the journal is whole; try again past the next batch.
    rabbit_log:error("delaybench_delayed_exchange: journal compaction "
                     "failed (~p); the journal is kept as it is", [Reason]),
    S1 = abort_compaction(S),
    {noreply, S1, timeout(S1)};
handle_info(_Info, S) ->
    {noreply, S, timeout(S)}.

terminate(_Reason, S0) ->
    %% Clean stop: a compaction under way is dropped (the journal is
    %% whole), then take in what writers cast before we were told to stop,
    %% then sync and close the journal.
    S = abort_compaction(S0),
    S1 = drain(S),
    _ = do_sync(S1),
    _ = disk_log:close(?LOG),
    ok.

code_change(_OldVsn, S, _Extra) ->
    {ok, S}.

%%----------------------------------------------------------------------------

%% XName's id, interned if it is not yet: journaled before the reply, so
%% before any record naming it (its put is appended on a later cast).
intern(XName, S = #state{next_xid = Next}) ->
    case intern_local(XName, Next) of
        {XId, Next} -> {XId, S};
        {XId, Next1} -> {XId, append([{exchange, XId, XName}],
                                     S#state{next_xid = Next1})}
    end.

%% RKs' id for exchange XId, interned if it is not yet and the exchange
%% has fewer than ?MAX_ROUTINGS (journaled before the reply, as intern/2);
%% otherwise, or once the exchange was purged, the keys as a binary.
intern_routing(XId, RKs, S) ->
    Known = ets:lookup(?XETS, {XId, RKs}),
    Count = routings_of(XId),
    case {Known, exchange_name(XId)} of
        {[{_, RId}], _} ->
            {RId, S};
        {[], {ok, _}} when Count < ?MAX_ROUTINGS ->
            RId = Count + 1,
            add_routing(XId, RId, RKs),
            {RId, append([{routing, XId, RId, RKs}], S)};
        _ ->
            {encode_routing(RKs), S}
    end.

add_routing(XId, RId, RKs) ->
    true = ets:insert(?XETS, [{{XId, RKs}, RId}, {{XId, RId}, RKs},
                              {{routings, XId}, max(routings_of(XId), RId)}]).

%% Further casts already in the mailbox, at most N, oldest first.
take_batch(Acc, 0) ->
    lists:reverse(Acc);
take_batch(Acc, N) ->
    receive
        {'$gen_cast', Msg} -> take_batch([Msg | Acc], N - 1)
    after 0 ->
        lists:reverse(Acc)
    end.

%% Appends a batch of writes so that the journal agrees with ETS for every
%% key they name: purges first, then the records still in ETS (a key no
%% longer in ETS was released or purged and must not reach the file),
%% then deletions. Keys are never reused, so this order gives the same
%% result as applying the casts one by one in any arrival order.
apply_writes(Msgs, S) ->
    Purges = [{purge, X} || {purge, X} <- Msgs],
    Puts = [{put, R} || {persist, K} <- Msgs, R <- ets:lookup(?ETS, K)],
    Dels = [{del, K} || {forget, K} <- Msgs],
    append(Purges ++ Puts ++ Dels, S).

%% Appends entries to the journal (and to a compaction's delta).
append([], S) ->
    S;
append(Entries, S = #state{writes = W, entries = E, compacting = C}) ->
    ok = disk_log:log_terms(?LOG, Entries),
    N = length(Entries),
    C1 = case C of
             undefined -> undefined;
             {Pid, At, Delta, DN} -> {Pid, At, lists:reverse(Entries, Delta),
                                      DN + N}
         end,
    written(S#state{writes = W + N, entries = E + N, compacting = C1}).

maybe_compact(S = #state{compacting = undefined, entries = E}) ->
    case E > 2 * count() + ?COMPACT_SLACK of
        true -> start_compaction(S);
        false -> S
    end;
maybe_compact(S) ->
    S.

%% Starts copying ETS into a fresh file (see the module doc). The store
%% owns the file (a disk_log closes when its owner dies); the copying
%% process, linked, writes to it by name and tells the store when done.
start_compaction(S = #state{file = File}) ->
    Tmp = compact_path(File),
    _ = file:delete(Tmp),
    {ok, ?COMPACT_LOG} = disk_log:open([{name, ?COMPACT_LOG}, {file, Tmp},
                                        {type, halt}, {format, internal}]),
    Store = self(),
    Pid = spawn_link(
            fun() ->
                    %% The exchanges first, so that replay knows them by
                    %% the records; one interned meanwhile is in the delta.
                    Interned = ets:tab2list(?XETS),
                    ok = disk_log:log_terms(
                           ?COMPACT_LOG,
                           [{exchange, XId, XName}
                            || {XId, XName} <- Interned, is_integer(XId)] ++
                           [{routing, XId, RId, RKs}
                            || {{XId, RId}, RKs} <- Interned,
                               is_integer(XId), is_integer(RId)]),
                    N = copy_table(ets:select(?ETS, [{'_', [], [{{put, '$_'}}]}],
                                              ?COMPACT_CHUNK), 0),
                    Store ! {copied, self(), N}
            end),
    S#state{compacting = {Pid, erlang:monotonic_time(millisecond), [], 0}}.

%% The copy holds N messages: append the delta, commit by the rename.
finish_compaction(N, S = #state{file = File, compactions = C,
                                compacting = {_, Started, Delta, DN}}) ->
    ok = disk_log:log_terms(?COMPACT_LOG, lists:reverse(Delta)),
    ok = disk_log:sync(?COMPACT_LOG),
    ok = disk_log:close(?COMPACT_LOG),
    ok = disk_log:close(?LOG),
    ok = file:rename(compact_path(File), File),
    {ok, ?LOG} = disk_log:open([{name, ?LOG}, {file, File}, {type, halt},
                                {format, internal}, {repair, true}]),
    Ms = erlang:monotonic_time(millisecond) - Started,
    rabbit_log:info("delaybench_delayed_exchange: journal compacted to ~b "
                    "message(s) and ~b entries appended meanwhile, in ~b ms",
                    [N, DN, Ms]),
    %% The old journal's unsynced tail is in the new one, synced.
    S#state{entries = N + DN, compactions = C + 1, compacting = undefined,
            last_compaction = #{messages => N, appended_meanwhile => DN,
                                ms => Ms}}.

abort_compaction(S = #state{compacting = undefined}) ->
    S;
abort_compaction(S = #state{file = File, compacting = {Pid, _, _, _}}) ->
    unlink(Pid),
    exit(Pid, kill),
    receive {copied, Pid, _} -> ok after 0 -> ok end,
    _ = disk_log:close(?COMPACT_LOG),
    _ = file:delete(compact_path(File)),
    S#state{compacting = undefined}.

%% At start, before any writer: compacts and waits for it.
compact_now(S0) ->
    S = #state{compacting = {Pid, _, _, _}} = start_compaction(S0),
    receive
        {copied, Pid, N} -> finish_compaction(N, S);
        {'EXIT', Pid, Reason} when Reason =/= normal -> exit(Reason)
    end.

copy_table('$end_of_table', N) ->
    N;
copy_table({Puts, Cont}, N) ->
    ok = disk_log:log_terms(?COMPACT_LOG, Puts),
    copy_table(ets:select(Cont), N + length(Puts)).

compact_path(File) ->
    File ++ ".compact".

written(S = #state{sync_ms = 0}) ->
    S#state{dirty = true};
written(S = #state{timer = undefined, sync_ms = Ms}) ->
    Ref = erlang:start_timer(Ms, self(), sync),
    S#state{dirty = true, timer = Ref};
written(S) ->
    S#state{dirty = true}.

%% With sync_interval_ms = 0, a gen_server timeout of 0 makes us sync as
%% soon as no message is waiting.
timeout(#state{sync_ms = 0, dirty = true}) -> 0;
timeout(_) -> infinity.

do_sync(S = #state{dirty = false}) ->
    S;
do_sync(S = #state{syncs = N, timer = T}) ->
    ok = disk_log:sync(?LOG),
    _ = case T of
            undefined -> ok;
            _ -> erlang:cancel_timer(T, [{async, true}, {info, false}])
        end,
    S#state{dirty = false, timer = undefined, syncs = N + 1,
            last_sync_us = now_micros()}.

drain(S) ->
    case take_batch([], ?BATCH) of
        [] -> S;
        Msgs -> drain(apply_writes(Msgs, S))
    end.
