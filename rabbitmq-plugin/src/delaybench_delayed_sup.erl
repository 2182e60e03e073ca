%% Supervisor of the store (pending messages) and the scheduler.
-module(delaybench_delayed_sup).
-behaviour(supervisor).

-export([start_link/0, init/1]).

start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

init([]) ->
    %% The store first: it owns the pending-message tables the scheduler
    %% reads. rest_for_one: if the store restarts (reloading from its
    %% file), the scheduler restarts too and re-arms from the new table.
    Store = #{id => delaybench_delayed_store,
              start => {delaybench_delayed_store, start_link, []},
              restart => permanent,
              %% A clean stop writes and fsyncs what is pending.
              shutdown => 60000,
              type => worker,
              modules => [delaybench_delayed_store]},
    Scheduler = #{id => delaybench_delayed_scheduler,
                  start => {delaybench_delayed_scheduler, start_link, []},
                  restart => permanent,
                  shutdown => 5000,
                  type => worker,
                  modules => [delaybench_delayed_scheduler]},
    {ok, {#{strategy => rest_for_one, intensity => 10, period => 10},
          [Store, Scheduler]}}.
