#!/usr/bin/env bash
# The project's test command (see README): starts the services the tests
# talk to if they are down, builds and enables the project's RabbitMQ
# x-delayed-message plugin, then runs the tests of the workspace against
# the real PostgreSQL, MariaDB, SQLite, Redis and RabbitMQ (about 15
# minutes on two cores). Tests never skip a backend: an unreachable one
# fails naming its URL and how to start it. The longer suites (the full
# chaos preset, the clusters, restarts of the shared Redis) are
# scripts/test-long.sh; CI runs both.
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
bash scripts/test-prepare.sh
# --no-fail-fast: one failing test binary must not hide the others' results.
cargo test --workspace --no-fail-fast "$@"
