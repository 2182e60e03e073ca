#!/usr/bin/env bash
# The project's test command (see README): starts the services the tests
# talk to if they are down, then runs every test of the workspace against
# the real PostgreSQL, MariaDB and SQLite. Tests never skip a backend: an
# unreachable one fails naming its URL.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh postgres mariadb
cargo test --workspace "$@"
