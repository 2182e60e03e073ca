%% Storage of pending delayed messages.
%%
%% One Mnesia table, ?TABLE: an ordered_set keyed by
%% {DueMicros, Seq, Guid}, so the first key is always the message due
%% first. It is disc_copies (kept in RAM, logged and checkpointed to the
%% node's Mnesia directory, reloaded at boot), so pending messages survive
%% `rabbitmqctl stop_app'/`start_app' and broker restarts. It is
%% local_content: in a cluster every node keeps and releases the messages
%% that were published through it.
-module(delaybench_delayed_store).

-include_lib("rabbit_common/include/rabbit.hrl").
-include("delaybench_delayed.hrl").

-export([setup/0, insert/3, first/0, read/1, delete/1, purge/1,
         count/0, count/1, now_micros/0, due_of/1]).

-define(WAIT_FOR_TABLE_MS, 60000).

%% Boot step (requires `database'): create the table if it does not exist,
%% make sure this node holds a disc copy, and wait until it is loaded.
setup() ->
    Def = [{record_name, delaybench_delayed_message},
           {attributes, record_info(fields, delaybench_delayed_message)},
           {type, ordered_set},
           {local_content, true},
           {disc_copies, [node()]}],
    Created = case mnesia:create_table(?TABLE, Def) of
                  {atomic, ok} -> ok;
                  {aborted, {already_exists, ?TABLE}} -> ensure_local_copy();
                  {aborted, Reason} -> {error, {create_table, Reason}}
              end,
    case Created of
        ok ->
            case mnesia:wait_for_tables([?TABLE], ?WAIT_FOR_TABLE_MS) of
                ok -> ok;
                {timeout, Tabs} -> {error, {table_not_loaded, Tabs}};
                {error, _} = E -> E
            end;
        Error ->
            Error
    end.

ensure_local_copy() ->
    case lists:member(node(), mnesia:table_info(?TABLE, disc_copies)) of
        true ->
            ok;
        false ->
            case mnesia:add_table_copy(?TABLE, node(), disc_copies) of
                {atomic, ok} -> ok;
                {aborted, {already_exists, ?TABLE, _}} ->
                    {atomic, ok} = mnesia:change_table_copy_type(
                                     ?TABLE, node(), disc_copies),
                    ok;
                {aborted, Reason} -> {error, {add_table_copy, Reason}}
            end
    end.

%% Store Msg, published to XName, to be routed DelayMs from now, and tell
%% the scheduler about the new due time.
insert(XName, DelayMs, Msg) when is_integer(DelayMs), DelayMs > 0 ->
    Due = now_micros() + DelayMs * 1000,
    Key = {Due, erlang:unique_integer([monotonic, positive]), rabbit_guid:gen()},
    ok = mnesia:dirty_write(?TABLE, #delaybench_delayed_message{
                                       key = Key,
                                       exchange = XName,
                                       message = Msg}),
    delaybench_delayed_scheduler:notify(Due).

%% The key of the message due first, or '$end_of_table'.
first() ->
    mnesia:dirty_first(?TABLE).

read(Key) ->
    mnesia:dirty_read(?TABLE, Key).

delete(Key) ->
    mnesia:dirty_delete(?TABLE, Key).

%% Delete every pending message of exchange XName; returns how many.
purge(XName) ->
    Keys = mnesia:dirty_select(
             ?TABLE,
             [{#delaybench_delayed_message{key = '$1', exchange = XName,
                                           _ = '_'},
               [], ['$1']}]),
    lists:foreach(fun (K) -> mnesia:dirty_delete(?TABLE, K) end, Keys),
    length(Keys).

%% Number of pending messages (all exchanges of this node).
count() ->
    mnesia:table_info(?TABLE, size).

%% Number of pending messages of one exchange (scans the table).
count(XName) ->
    length(mnesia:dirty_select(
             ?TABLE,
             [{#delaybench_delayed_message{exchange = XName, _ = '_'},
               [], [true]}])).

now_micros() ->
    erlang:system_time(microsecond).

due_of({Due, _Seq, _Guid}) -> Due.
