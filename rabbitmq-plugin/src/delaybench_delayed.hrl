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

-record(delaybench_delayed_message,
        {key,      %% {DueMicros, Seq, Guid}: wall-clock due time in
                   %% microseconds since the Unix epoch, then a
                   %% per-incarnation counter (FIFO among equal due times),
                   %% then a globally unique id (no clash across restarts)
         exchange, %% #resource{kind = exchange} the message was published to
         message   %% {packed, Bin}: the message as published, a
                   %% #basic_message{} (RabbitMQ 3.10-3.12) or a message
                   %% container, mc:state() (3.13+/4.x), in external term
                   %% format with its decoded properties left out
                   %% (delaybench_delayed_store:pack/1, unpack/1); records
                   %% of plugin commits before 3819e59 hold the message itself
        }).

%% Process-dictionary key the scheduler sets while it routes a stored
%% message, so that the route callback of that exchange (route/2 on
%% RabbitMQ 3.10-3.12, route/3 on 3.13+/4.x) routes it at once instead of
%% storing it again.
-define(RELEASING, '$delaybench_delayed_releasing').
