%% Supervisor of the scheduler.
-module(delaybench_delayed_sup).
-behaviour(supervisor).

-export([start_link/0, init/1]).

start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

init([]) ->
    Scheduler = #{id => delaybench_delayed_scheduler,
                  start => {delaybench_delayed_scheduler, start_link, []},
                  restart => permanent,
                  shutdown => 5000,
                  type => worker,
                  modules => [delaybench_delayed_scheduler]},
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10},
          [Scheduler]}}.
