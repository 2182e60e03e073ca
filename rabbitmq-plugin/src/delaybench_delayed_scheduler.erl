%% The scheduler: one process per node that sleeps until the earliest due
%% time in the store, then routes every message that is due, in due-time
%% order, through its exchange, and sleeps again.
%%
%% It never polls: it arms one timer for the first key of the ordered
%% table, and delaybench_delayed_store:insert/3 casts each new due time to
%% it, so an earlier message re-arms the timer. Timer waits are capped at
%% ?MAX_SLEEP_MS so that a wall-clock jump forward is noticed soon. Due
%% messages are released in batches of ?BATCH, yielding between batches so
%% new due times are still taken in.
-module(delaybench_delayed_scheduler).
-behaviour(gen_server).

-include_lib("rabbit_common/include/rabbit.hrl").
-include("delaybench_delayed.hrl").

-export([start_link/0, notify/1, status/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2,
         terminate/2, code_change/3]).

-define(SERVER, ?MODULE).
-define(BATCH, 500).
-define(MAX_SLEEP_MS, 60000).

-record(state, {timer = undefined :: undefined | reference(),
                armed = infinity :: infinity | integer(), %% due (us) armed for
                released = 0 :: non_neg_integer(),
                dropped = 0 :: non_neg_integer()}).

start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%% A message due at Due (us) was stored. Cheap and asynchronous; harmless
%% when the scheduler is not running (it reads the table when it starts).
notify(Due) ->
    gen_server:cast(?SERVER, {stored, Due}).

%% Counters for rabbitmqctl eval 'delaybench_delayed_scheduler:status().'
status() ->
    gen_server:call(?SERVER, status).

init([]) ->
    {ok, rearm(#state{})}.

handle_call(status, _From, S = #state{armed = Armed, released = R,
                                      dropped = D}) ->
    Reply = #{pending => delaybench_delayed_store:count(),
              next_due_us => Armed,
              released => R,
              dropped => D},
    {reply, Reply, S};
handle_call(_Req, _From, S) ->
    {reply, {error, unknown_call}, S}.

handle_cast({stored, Due}, S = #state{armed = Armed}) when Due < Armed ->
    {noreply, arm(Due, S)};
handle_cast(_Msg, S) ->
    {noreply, S}.

handle_info({timeout, Ref, release}, S = #state{timer = Ref}) ->
    {noreply, release(S#state{timer = undefined, armed = infinity})};
handle_info({timeout, _StaleRef, release}, S) ->
    {noreply, S};
handle_info(_Info, S) ->
    {noreply, S}.

terminate(_Reason, _S) ->
    ok.

code_change(_OldVsn, S, _Extra) ->
    {ok, S}.

%%----------------------------------------------------------------------------

%% Arm the timer for the first key of the table (or go idle).
rearm(S) ->
    case delaybench_delayed_store:first() of
        '$end_of_table' -> cancel(S);
        Key -> arm(delaybench_delayed_store:due_of(Key), cancel(S))
    end.

arm(Due, S0) ->
    S = cancel(S0),
    WaitMs = min(?MAX_SLEEP_MS,
                 ceil_div(Due - delaybench_delayed_store:now_micros(), 1000)),
    Ref = erlang:start_timer(max(0, WaitMs), self(), release),
    S#state{timer = Ref, armed = Due}.

cancel(S = #state{timer = undefined}) ->
    S#state{armed = infinity};
cancel(S = #state{timer = Ref}) ->
    _ = erlang:cancel_timer(Ref, [{async, true}, {info, false}]),
    S#state{timer = undefined, armed = infinity}.

ceil_div(A, B) when A =< 0 -> A div B;
ceil_div(A, B) -> (A + B - 1) div B.

%% Release due messages, at most ?BATCH, then re-arm.
release(S) ->
    release(delaybench_delayed_store:now_micros(), ?BATCH, #{}, S).

release(_Now, 0, _XCache, S) ->
    %% Batch done; more may be due: come back right after pending casts.
    arm(0, S);
release(Now, Left, XCache, S) ->
    case delaybench_delayed_store:first() of
        '$end_of_table' ->
            cancel(S);
        Key ->
            case delaybench_delayed_store:due_of(Key) of
                Due when Due =< Now ->
                    {XCache1, S1} = release_one(Key, XCache, S),
                    release(Now, Left - 1, XCache1, S1);
                Due ->
                    arm(Due, S)
            end
    end.

release_one(Key, XCache, S) ->
    case delaybench_delayed_store:read(Key) of
        [Rec = #delaybench_delayed_message{exchange = XId}] ->
            {Lookup, XCache1} = lookup_exchange(XId, XCache),
            Outcome = case Lookup of
                          {ok, X} -> route(X, Rec);
                          {error, not_found} -> {dropped, exchange_not_found}
                      end,
            %% Deleted after routing: a crash in between re-delivers the
            %% message after the restart (at least once).
            ok = delaybench_delayed_store:delete(Key),
            {XCache1, count(Outcome, XId, S)};
        [] ->
            {XCache, S}
    end.

%% The exchange of an interned id, once per batch; not found once its
%% exchange was deleted (the store forgot the id).
lookup_exchange(XId, XCache) ->
    case maps:find(XId, XCache) of
        {ok, Found} ->
            {Found, XCache};
        error ->
            Found = case delaybench_delayed_store:exchange_name(XId) of
                        {ok, XName} -> rabbit_exchange:lookup(XName);
                        error -> {error, not_found}
                    end,
            {Found, XCache#{XId => Found}}
    end.

%% Route Msg through X (the process flag makes the exchange's route
%% callback route it instead of storing it again) and deliver it to the
%% queues found, statelessly. Msg is what the route callback stored: a
%% #basic_message{} on RabbitMQ 3.10-3.12, a message container (mc) on
%% 3.13+/4.x.
route(X = #exchange{name = XName}, Rec) ->
    put(?RELEASING, XName),
    try
        Msg = delaybench_delayed_store:unpack(XName, Rec),
        case mc_api() of
            true -> route_mc(X, to_mc(Msg));
            false -> route_delivery(X, Msg)
        end
    catch
        Class:Error ->
            {dropped, {Class, Error}}
    after
        erase(?RELEASING)
    end.

%% RabbitMQ 3.10-3.12: #delivery{} records, rabbit_exchange:route/2,
%% rabbit_queue_type:deliver/3.
route_delivery(X, Msg) ->
    Delivery = #delivery{mandatory = false,
                         confirm = false,
                         sender = self(),
                         message = Msg,
                         msg_seq_no = undefined,
                         flow = noflow},
    QNames = rabbit_exchange:route(X, Delivery),
    Qs = rabbit_amqqueue:lookup(QNames),
    case rabbit_queue_type:deliver(Qs, Delivery, stateless) of
        {ok, _, _} -> released;
        {error, Reason} -> {dropped, Reason}
    end.

%% RabbitMQ 3.13+/4.x: the message container itself is routed
%% (rabbit_exchange:route/3) and delivered (rabbit_queue_type:deliver/4).
%% Destinations other than queue names (e.g. a direct-reply-to
%% pseudo-queue in later releases) are skipped.
route_mc(X, Mc) ->
    QNames = [QName || Dest <- rabbit_exchange:route(X, Mc, #{}),
                       QName <- queue_name(Dest)],
    Qs = rabbit_amqqueue:lookup_many(QNames),
    case rabbit_queue_type:deliver(Qs, Mc, #{}, stateless) of
        {ok, _, _} -> released;
        {error, Reason} -> {dropped, Reason}
    end.

queue_name(#resource{kind = queue} = QName) -> [QName];
queue_name({#resource{kind = queue} = QName, _Infos}) -> [QName];
queue_name(_) -> [].

%% A #basic_message{} left by RabbitMQ 3.x in the store of a node now
%% running 3.13+/4.x is converted to a message container.
to_mc(#basic_message{} = Msg) -> mc_amqpl:from_basic_message(Msg);
to_mc(Mc) -> Mc.

%% Whether this broker has the message-container API (3.13 and later).
mc_api() ->
    case persistent_term:get({?MODULE, mc_api}, undefined) of
        undefined ->
            {module, _} = code:ensure_loaded(rabbit_queue_type),
            Mc = erlang:function_exported(rabbit_queue_type, deliver, 4),
            persistent_term:put({?MODULE, mc_api}, Mc),
            Mc;
        Mc ->
            Mc
    end.

count(released, _XName, S = #state{released = R}) ->
    S#state{released = R + 1};
count({dropped, Reason}, XId, S = #state{dropped = D}) ->
    Of = case delaybench_delayed_store:exchange_name(XId) of
             {ok, XName} -> rabbit_misc:rs(XName);
             error -> io_lib:format("a deleted exchange (id ~b)", [XId])
         end,
    rabbit_log:warning("delaybench_delayed_exchange: dropped a delayed "
                       "message of ~s: ~p", [Of, Reason]),
    S#state{dropped = D + 1}.
