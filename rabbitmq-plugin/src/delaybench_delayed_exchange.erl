%% The `x-delayed-message' exchange type (clean-room implementation for
%% delaybench).
%%
%% An exchange of this type is declared with the argument
%% `x-delayed-type' naming another exchange type (direct, topic, headers,
%% fanout, ...). Every callback is delegated to that type, except routing:
%% a message whose `x-delay' header is a positive number of milliseconds
%% is stored (see delaybench_delayed_store) and the route callback returns
%% no destination; the scheduler (delaybench_delayed_scheduler) routes it
%% through the same exchange when it is due. Any other message is routed
%% at once by the underlying type.
%%
%% One module for both exchange-type APIs, chosen by the broker at run
%% time (the module exports the callbacks of both):
%%   - RabbitMQ 3.10-3.12: route/2 gets a #delivery{} whose message is a
%%     #basic_message{}; create/2 and delete/3 get a transaction marker;
%%   - RabbitMQ 3.13+/4.x: route/3 gets a message container (mc:state())
%%     and route options; rabbit_exchange prefers route/3 when it is
%%     exported; create/2 and delete/2 get a serial number (or none).
%% It compiles against either broker's rabbit.hrl (4.0.5 still defines
%% #delivery{} and #basic_message{}).
-module(delaybench_delayed_exchange).
-behaviour(rabbit_exchange_type).

-include_lib("rabbit_common/include/rabbit.hrl").
-include_lib("rabbit_common/include/rabbit_framing.hrl").
-include("delaybench_delayed.hrl").

-export([description/0, serialise_events/0, route/2, route/3, validate/1,
         validate_binding/2, create/2, delete/2, delete/3, policy_changed/2,
         add_binding/3, remove_bindings/3, assert_args_equivalence/2,
         info/1, info/2]).
-export([delay_of/1, underlying_module/1]).

-rabbit_boot_step({delaybench_delayed_exchange_type,
                   [{description, "exchange type x-delayed-message (delaybench)"},
                    {mfa, {rabbit_registry, register,
                           [exchange, ?TYPE_NAME, ?MODULE]}},
                    {cleanup, {rabbit_registry, unregister,
                               [exchange, ?TYPE_NAME]}},
                    {requires, rabbit_registry},
                    {enables, kernel_ready}]}).

%% No boot step for the store: it is a process of this application
%% (delaybench_delayed_sup), not a Mnesia table, so nothing here depends on
%% RabbitMQ's `database' step.

%%----------------------------------------------------------------------------
%% rabbit_exchange_type callbacks

description() ->
    [{description, <<"Delays messages by their x-delay header (ms), then "
                     "routes them as the type named by x-delayed-type "
                     "(delaybench clean-room plugin)">>}].

%% None of the built-in types serialise their events; the exchange
%% callbacks pass the same transaction marker on to the underlying type.
serialise_events() -> false.

%% RabbitMQ 3.10-3.12: the message is Delivery#delivery.message, a
%% #basic_message{}.
route(X = #exchange{name = XName},
      Delivery = #delivery{message = Msg}) ->
    case get(?RELEASING) of
        XName ->
            %% The scheduler is releasing a stored message of this
            %% exchange: route it now.
            (underlying_module(X)):route(X, Delivery);
        _ ->
            case delay_of(Msg) of
                Delay when is_integer(Delay), Delay > 0 ->
                    ok = delaybench_delayed_store:insert(XName, Delay, Msg),
                    [];
                _ ->
                    (underlying_module(X)):route(X, Delivery)
            end
    end;
%% RabbitMQ 3.13+/4.x callers of the deprecated route/2 pass an mc.
route(X, Msg) ->
    route(X, Msg, #{}).

%% RabbitMQ 3.13+/4.x: Msg is a message container (mc:state()); the
%% whole container is what gets stored.
route(X = #exchange{name = XName}, Msg, Opts) ->
    case get(?RELEASING) of
        XName ->
            underlying_route(X, Msg, Opts);
        _ ->
            case delay_of(Msg) of
                Delay when is_integer(Delay), Delay > 0 ->
                    ok = delaybench_delayed_store:insert(XName, Delay, Msg),
                    [];
                _ ->
                    underlying_route(X, Msg, Opts)
            end
    end.

underlying_route(X, Msg, Opts) ->
    Module = underlying_module(X),
    case exports(Module, route, 3) of
        true -> Module:route(X, Msg, Opts);
        false -> Module:route(X, Msg)
    end.

validate(X) ->
    Module = underlying_module(X),
    Module:validate(X).

validate_binding(X, B) ->
    (underlying_module(X)):validate_binding(X, B).

create(Tx, X) ->
    (underlying_module(X)):create(Tx, X).

%% RabbitMQ 3.10-3.12: called in the transaction and once after it
%% (Tx = none).
delete(Tx, X = #exchange{name = XName}, Bs) ->
    ok = (underlying_module(X)):delete(Tx, X, Bs),
    case Tx of
        none ->
            %% After the transaction: drop what was still pending for the
            %% deleted exchange, so a later exchange of the same name does
            %% not receive it.
            _ = delaybench_delayed_store:purge(XName),
            ok;
        _ ->
            ok
    end.

%% RabbitMQ 3.13+/4.x: called once, after the exchange is deleted.
delete(Serial, X = #exchange{name = XName}) ->
    ok = (underlying_module(X)):delete(Serial, X),
    _ = delaybench_delayed_store:purge(XName),
    ok.

policy_changed(X1, X2) ->
    (underlying_module(X1)):policy_changed(X1, X2).

add_binding(Tx, X, B) ->
    (underlying_module(X)):add_binding(Tx, X, B).

remove_bindings(Tx, X, Bs) ->
    (underlying_module(X)):remove_bindings(Tx, X, Bs).

assert_args_equivalence(X = #exchange{name = Name, arguments = Args},
                        RequiredArgs) ->
    %% x-delayed-type must match on redeclaration, like the type itself.
    ok = rabbit_misc:assert_args_equivalence(Args, RequiredArgs, Name,
                                             [?ARG_TYPE]),
    (underlying_module(X)):assert_args_equivalence(X, RequiredArgs).

info(_X) -> [].

info(_X, _Items) -> [].

%%----------------------------------------------------------------------------
%% Helpers

%% The exchange-type module named by the exchange's x-delayed-type
%% argument. Fails the current AMQP method with PRECONDITION_FAILED when
%% the argument is missing, not a string, unknown, or this type itself.
underlying_module(#exchange{arguments = Args}) ->
    case rabbit_misc:table_lookup(Args, ?ARG_TYPE) of
        undefined ->
            precondition_failed("Invalid argument, '~s' must be set to an "
                                "existing exchange type (e.g. direct, topic, "
                                "headers, fanout)", [?ARG_TYPE]);
        {longstr, TypeBin} ->
            lookup_type(TypeBin);
        {Type, _} ->
            precondition_failed("Invalid argument, '~s' must be a string, "
                                "got a value of type ~s", [?ARG_TYPE, Type])
    end.

lookup_type(?TYPE_NAME) ->
    precondition_failed("Invalid argument, '~s' cannot be '~s' itself",
                        [?ARG_TYPE, ?TYPE_NAME]);
lookup_type(TypeBin) ->
    Found = case rabbit_registry:binary_to_type(TypeBin) of
                {error, not_found} -> {error, not_found};
                T -> rabbit_registry:lookup_module(exchange, T)
            end,
    case Found of
        {ok, Module} ->
            Module;
        {error, not_found} ->
            precondition_failed("Invalid argument, '~s' names an unknown "
                                "exchange type '~s'", [?ARG_TYPE, TypeBin])
    end.

precondition_failed(Fmt, Args) ->
    rabbit_misc:protocol_error(precondition_failed, Fmt, Args).

%% Whether Module (loaded if needed) exports F/A.
exports(Module, F, A) ->
    _ = code:ensure_loaded(Module),
    erlang:function_exported(Module, F, A).

%% The message's x-delay header in milliseconds, or `none'. Accepts every
%% AMQP integer type, floats (rounded) and decimal strings. Msg is a
%% #basic_message{} (3.10-3.12) or a message container (3.13+), whose
%% mc:x_header/2 gives {Type, Value} for AMQP 0-9-1 headers and AMQP 1.0
%% message annotations alike.
delay_of(#basic_message{content = Content}) ->
    #content{properties = Props} =
        rabbit_binary_parser:ensure_content_decoded(Content),
    case Props of
        #'P_basic'{headers = Headers} when is_list(Headers) ->
            case rabbit_misc:table_lookup(Headers, ?HDR_DELAY) of
                undefined -> none;
                {_Type, Value} -> to_millis(Value)
            end;
        _ ->
            none
    end;
delay_of(Msg) ->
    case mc:x_header(?HDR_DELAY, Msg) of
        {_Type, Value} -> to_millis(Value);
        _ -> none
    end.

to_millis(V) when is_integer(V) ->
    V;
to_millis(V) when is_float(V) ->
    round(V);
to_millis(V) when is_binary(V) ->
    case string:to_integer(string:trim(binary_to_list(V))) of
        {Int, []} -> Int;
        _ -> none
    end;
to_millis(_) ->
    none.
