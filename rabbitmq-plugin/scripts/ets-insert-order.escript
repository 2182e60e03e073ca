#!/usr/bin/env escript
-mode(compile).
%% How fast an ordered_set of N records shaped like the plugin's takes
%% inserts, by the order their keys {Due, Seq} arrive in:
%%   monotonic  - Due grows with each insert (one publisher, one delay);
%%   us-jitter  - Due = a common deadline + 0..999 us at random (publishers
%%                of one deadline computing their delay in whole ms, as the
%%                backlog hand-off does), Seq growing;
%%   ms-rounded - the same, Due rounded up to a whole ms;
%%   random     - Due spread over an hour at random (delays of every size).
%% Each kind (KINDS, default all four) is timed once per batch size
%% (BATCHES, default 1 and 500 records an ets:insert call). It needs only Erlang (no broker); it measures the table alone.
%% Usage: ets-insert-order.escript [N]   (default 1000000)
%%   KINDS=us-jitter,ms-rounded BATCHES=1 ets-insert-order.escript 10000000
main(Args) ->
    N = case Args of [A] -> list_to_integer(A); [] -> 1000000 end,
    Base = 1764900000000000,
    Body = binary:copy(<<"x">>, 52),
    Head = binary:copy(<<"h">>, 20),
    Kinds = [{"monotonic", fun(I) -> Base + I end},
             {"us-jitter", fun(_) -> Base + rand:uniform(1000) - 1 end},
             {"ms-rounded", fun(_) -> ((Base + rand:uniform(1000) - 1 + 999) div 1000) * 1000 end},
             {"random", fun(_) -> Base + rand:uniform(3600000000) end}],
    [run(Name, DueOf, N, Head, Body, Batch) || Batch <- batches(), {Name, DueOf} <- kinds(Kinds)],
    ok.

run(Name, DueOf, N, Head, Body, Batch) ->
    T = ets:new(t, [ordered_set, public, {keypos, 2},
                    {read_concurrency, true}, {write_concurrency, true}]),
    Keys = [{DueOf(I), I} || I <- lists:seq(1, N)],
    garbage_collect(),
    T0 = erlang:monotonic_time(microsecond),
    insert(T, Keys, Batch, Head, Body),
    Us = erlang:monotonic_time(microsecond) - T0,
    io:format("~-10s ~b inserts, ~b a call, in ~b ms: ~.2f us each~n", [Name, N, Batch, Us div 1000, Us / N]),
    ets:delete(T).

insert(T, Keys, 1, Head, Body) ->
    lists:foreach(fun(K) -> ets:insert(T, {msg, K, 1, 1, Head, Body}) end, Keys);
insert(_T, [], _Batch, _Head, _Body) ->
    ok;
insert(T, Keys, Batch, Head, Body) ->
    {Now, Rest} = take(Batch, Keys, []),
    ets:insert(T, [{msg, K, 1, 1, Head, Body} || K <- Now]),
    insert(T, Rest, Batch, Head, Body).

take(0, Rest, Acc) -> {lists:reverse(Acc), Rest};
take(_, [], Acc) -> {lists:reverse(Acc), []};
take(K, [H | T], Acc) -> take(K - 1, T, [H | Acc]).

batches() -> [list_to_integer(B) || B <- string:tokens(os:getenv("BATCHES", "1,500"), ",")].
kinds(Kinds) ->
    Want = string:tokens(os:getenv("KINDS", "monotonic,us-jitter,ms-rounded,random"), ","),
    [K || K = {Name, _} <- Kinds, lists:member(Name, Want)].
