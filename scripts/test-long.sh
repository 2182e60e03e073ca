#!/usr/bin/env bash
# The second test command (see README): the suites too long for every day
# or that disturb the shared services: the full chaos preset through the
# CLI, the Redis and RabbitMQ clusters (started by the tests), and a
# restart of the shared Redis. About 6 minutes on two cores; CI runs it
# after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-prepare.sh
# --no-fail-fast: one failing test binary must not hide the others' results.
cargo test --no-fail-fast -p delaybench --features long-tests --test chaos "$@"
cargo test --no-fail-fast -p delaybench-strategies --features long-tests \
  --test rabbit_cluster --test redis_cluster --test redis_restart "$@"
