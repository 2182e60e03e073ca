#!/usr/bin/env bash
# What both test commands need first (scripts/test.sh, scripts/test-long.sh):
# starts the services the tests talk to if they are down, turns TLS on for
# them (scripts/tls.sh), builds and
# enables the project's x-delayed-message plugin, and deletes the queues
# that interrupted test runs left on the broker.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh postgres mariadb redis rabbitmq
# TLS on the same services, for strategies/tests/tls.rs (idempotent: once
# set up, nothing is restarted).
if [ "$(id -u)" = 0 ]; then
  bash scripts/tls.sh setup
else
  echo "test.sh: not root, so TLS is not set up; the TLS tests need: sudo bash scripts/tls.sh setup" >&2
fi
# Headless Chromium, in which harness/tests/index.rs renders the results
# index (and CI screenshots a report).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test-prepare: installing Chromium (apt-get install chromium)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends chromium) >/dev/null ||
      echo "test-prepare: could not install Chromium; the index test will say so" >&2
  else
    echo "test-prepare: Chromium is missing; the index test needs it: sudo apt-get install -y chromium" >&2
  fi
fi
if command -v rabbitmqctl >/dev/null 2>&1; then
  bash rabbitmq-plugin/install.sh
  # Durable queues and exchanges that earlier, interrupted test runs left
  # on this broker (test namespaces start with `t_`): hundreds of them make
  # every broker restart recover slowly, and the restart tests then lose
  # messages for reasons of their own. One call deletes them all.
  rabbitmqctl eval '
    Qs = [Q || Q <- rabbit_amqqueue:list(),
               binary:match(element(4, amqqueue:get_name(Q)), <<"dlb.t_">>) =/= nomatch],
    [rabbit_amqqueue:delete(Q, false, false, <<"delaybench-tests">>) || Q <- Qs],
    Xs = [element(2, X) || X <- rabbit_exchange:list(),
               binary:match(element(4, element(2, X)), <<"dlb.t_">>) =/= nomatch],
    [rabbit_exchange:delete(X, false, <<"delaybench-tests">>) || X <- Xs],
    {deleted_leftover_queues, length(Qs), exchanges, length(Xs)}.' ||
    echo "test.sh: could not delete leftover test queues (continuing)" >&2
else
  echo "test.sh: rabbitmqctl not found: the x-delayed-message plugin must already be enabled on the broker" >&2
  echo "  (docker compose up -d --wait rabbitmq builds a broker with it)" >&2
fi
