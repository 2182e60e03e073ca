#!/usr/bin/env bash
# What both test commands need first (scripts/test.sh, scripts/test-long.sh):
# installs and configures what is missing (scripts/setup.sh), starts the services the tests talk to if they are down, turns TLS on for
# them (scripts/tls.sh), builds and
# enables the project's x-delayed-message plugin, and deletes the queues
# that interrupted test runs left on the broker.
set -euo pipefail
cd "$(dirname "$0")/.."
cat >&2 <<'WARN'
test: these tests use the services on this machine and disturb them: they restart
  RabbitMQ's app (rabbitmqctl stop_app/start_app) and, in the long suites, Redis on 6379
  (SHUTDOWN NOSAVE: it comes back empty), and create and drop schemas, databases and
  dlb.* queues of their own. Run them on a machine or containers you can spare; the
  database URLs can point elsewhere with DELAYBENCH_PG_URL, DELAYBENCH_MYSQL_URL,
  DELAYBENCH_REDIS_URL and DELAYBENCH_AMQP_URL (the restarts always act on this host).
WARN
# DELAYBENCH_SERVICES=compose: the services from docker-compose.yml instead
# of this machine's (nothing installed here). UNVERIFIED: no Docker engine
# runs on the project's machines. The suites that restart a service or turn
# TLS on act on this host's own servers, so they fail there.
if [ "${DELAYBENCH_SERVICES:-}" = compose ]; then
  command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 ||
    { echo "test: DELAYBENCH_SERVICES=compose needs a running Docker engine (docker info failed)" >&2; exit 1; }
  echo "test: starting the services with docker compose (the plugin is built into the broker image)" >&2
  docker compose up -d --wait postgres mariadb redis rabbitmq
  exit 0
fi
# What a fresh Debian/Ubuntu machine lacks (scripts/setup.sh): as root it is
# installed and configured, otherwise the commands are printed. Packages
# first; roles and databases once the servers run.
if [ "$(id -u)" != 0 ] && command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  echo "test: not root; with the Docker engine here, DELAYBENCH_SERVICES=compose runs the services from docker-compose.yml instead" >&2
fi
bash scripts/setup.sh packages
bash scripts/services.sh postgres mariadb redis rabbitmq
bash scripts/setup.sh postgres mariadb
# TLS on the same services, for strategies/tests/tls.rs (idempotent: once
# set up, nothing is restarted).
if [ "$(id -u)" = 0 ]; then
  bash scripts/tls.sh setup
else
  echo "test.sh: not root, so TLS is not set up; the TLS tests need: sudo bash scripts/tls.sh setup" >&2
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
