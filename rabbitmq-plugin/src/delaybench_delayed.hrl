%% Shared definitions of the delaybench_delayed_exchange plugin.

%% The exchange type this plugin registers.
-define(TYPE_NAME, <<"x-delayed-message">>).
%% Exchange argument naming the type that does the actual routing.
-define(ARG_TYPE, <<"x-delayed-type">>).
%% Message header carrying the delay in milliseconds.
-define(HDR_DELAY, <<"x-delay">>).

%% Pending messages: an ETS ordered_set in RAM (public, owned by
%% delaybench_delayed_store) and a journal on disk (disk_log) of
%% #delaybench_delayed_message{} records. The ETS name differs from the
%% Mnesia table of plugin versions before 0.2.0, which on RabbitMQ 3.x is
%% also a named ETS table and may still exist.
-define(ETS, delaybench_delayed_pending).

%% Exchanges with pending messages and their routing keys, interned
%% (delaybench_delayed_store:exchange_id/1, routing/2): {XName, XId} and
%% {XId, XName}; {{XId, RKs}, RId} and {{XId, RId}, RKs}, at most
%% ?MAX_ROUTINGS per exchange, counted in {{routings, XId}, N}. Public:
%% publishers read it, the store interns, a purge forgets.
-define(XETS, delaybench_delayed_exchanges).
-define(MAX_ROUTINGS, 256).

-record(delaybench_delayed_message,
        {key,      %% {DueMicros, Seq}: wall-clock due time in microseconds
                   %% since the Unix epoch (os:system_time), then a number
                   %% unique across restarts (FIFO among equal due times).
                   %% Records of plugin builds before 2026-12-05 had
                   %% {Due, Seq, Guid}; they are read as {Due, {Seq, Guid}}
         exchange, %% XId: the interned exchange the message was published to
         routing,  %% its routing keys: RId, interned for this exchange; or
                   %% a binary of them (past ?MAX_ROUTINGS, or upgraded);
                   %% undefined when head is {packed, Bin}
         head,     %% binary: persistence flag and properties in wire form
                   %% of a RabbitMQ 3.10-3.12 message; or {packed, Bin}: any
                   %% other message whole, in external term format
                   %% (delaybench_delayed_store:pack/2)
         body      %% binary: the body (head is a binary); undefined
        }).

%% Process-dictionary key the scheduler sets while it routes a stored
%% message, so that the route callback of that exchange (route/2 on
%% RabbitMQ 3.10-3.12, route/3 on 3.13+/4.x) routes it at once instead of
%% storing it again.
-define(RELEASING, '$delaybench_delayed_releasing').
