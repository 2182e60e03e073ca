%% Application callback: starts the supervisor of the store and the
%% scheduler. The exchange type is registered by a boot step (see
%% delaybench_delayed_exchange), which RabbitMQ runs before starting this
%% application.
-module(delaybench_delayed_app).
-behaviour(application).

-export([start/2, stop/1]).

start(_Type, _Args) ->
    delaybench_delayed_sup:start_link().

stop(_State) ->
    ok.
