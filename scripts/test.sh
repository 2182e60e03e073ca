#!/usr/bin/env bash
# The project's test command (see README): starts the services the tests
# talk to if they are down, builds and enables the project's RabbitMQ
# x-delayed-message plugin, then runs every test of the workspace against
# the real PostgreSQL, MariaDB, SQLite, Redis and RabbitMQ. Tests never skip
# a backend: an unreachable one fails naming its URL and how to start it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh postgres mariadb redis rabbitmq
if command -v rabbitmqctl >/dev/null 2>&1; then
  bash rabbitmq-plugin/install.sh
else
  echo "test.sh: rabbitmqctl not found: the x-delayed-message plugin must already be enabled on the broker" >&2
  echo "  (docker compose up -d --wait rabbitmq builds a broker with it)" >&2
fi
cargo test --workspace "$@"
