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
bash scripts/test-prepare.sh
# --no-fail-fast: one failing test binary must not hide the others' results.
cargo test --workspace --no-fail-fast "$@"
