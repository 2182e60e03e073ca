#!/usr/bin/env bash
# The second test command (see README): the suites too long for every day
# or that disturb the shared services: the full chaos preset through the
# CLI, the Redis and RabbitMQ clusters (started by the tests), and a
# restart of the shared Redis, the management API over HTTPS on a broker
# node of its own, and the conformance suite again over TLS to every
# service. About 10 minutes on two cores; CI runs it after
# scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-prepare.sh
# --no-fail-fast: one failing test binary must not hide the others' results.
cargo test --no-fail-fast -p delaybench --features long-tests --test chaos --test hosts \
  --test management_tls "$@"
cargo test --no-fail-fast -p delaybench-strategies --features long-tests \
  --test rabbit_cluster --test redis_cluster --test redis_restart "$@"
# The conformance suite over TLS to PostgreSQL, MariaDB, Redis and RabbitMQ
# (issue 23): test-prepare.sh turns TLS on as root (scripts/tls.sh); without
# root there is no TLS to test, and this says so rather than pass.
if [ "$(id -u)" = 0 ]; then
  (
    eval "$(bash scripts/tls.sh env)"
    cargo test --no-fail-fast -p delaybench-strategies --test conformance "$@"
  )
else
  echo "test-long: not root, so TLS was not set up: the conformance suite over TLS did not run" >&2
  exit 1
fi
