#!/usr/bin/env bash
# Prepares a Debian or Ubuntu machine for the tests: installs what is
# missing and configures the services the way the tests reach them. Each
# step first checks, and does nothing where the machine already has it, so
# a second run changes nothing. scripts/test-prepare.sh runs it (the
# README's test command); as root it acts, otherwise it prints the commands
# and stops.
#
#   packages    postgresql, mariadb-server, redis-server, rabbitmq-server,
#               erlang-base and erlang-dev (erlc and the headers for the
#               project's RabbitMQ plugin), openssl (TLS tests), iproute2
#               (namespace hosts), chromium (the results index test)
#   PostgreSQL  a superuser role `root` that logs in from 127.0.0.1 and ::1
#               without a password (trust lines in pg_hba.conf, in a marked
#               block), and a database `test`
#   MariaDB     root over TCP from 127.0.0.1 and ::1 with an empty password
#               (Debian's root logs in by unix_socket only), and a
#               database `test`. root@localhost gets the empty password
#               too (the client names a socket login `localhost`), so any
#               local user may then log in as MariaDB's root: a test
#               machine's set-up, as the README says.
#   Redis, RabbitMQ  their packages' defaults (guest/guest on loopback)
#
# The services are started by scripts/services.sh, not here.
#
# Usage: scripts/setup.sh [--dry-run] [step...]
#   steps: packages postgres mariadb (default: all three)
#   --dry-run  print what would be done on this machine, change nothing
# Environment: DELAYBENCH_SETUP_PG_PORT (5432), DELAYBENCH_SETUP_PG_ADMIN
#   (a psql command line that reaches the server as a superuser; default:
#   `runuser -u postgres -- psql -p PORT`), for a scratch cluster in tests.
set -euo pipefail

dry=0
steps=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    packages | postgres | mariadb) steps+=("$arg") ;;
    *)
      echo "usage: $0 [--dry-run] [packages] [postgres] [mariadb]" >&2
      exit 2
      ;;
  esac
done
[ ${#steps[@]} -gt 0 ] || steps=(packages postgres mariadb)
if [ "$(id -u)" != 0 ] && [ $dry = 0 ]; then
  echo "setup: not root, so nothing is changed; as root this would do:" >&2
  dry=1
fi

PG_PORT=${DELAYBENCH_SETUP_PG_PORT:-5432}
PG_ADMIN=${DELAYBENCH_SETUP_PG_ADMIN:-runuser -u postgres -- psql -p $PG_PORT}
MARK_BEGIN="# delaybench-setup begin (scripts/setup.sh)"
MARK_END="# delaybench-setup end"
changed=0

say() { echo "setup: $*"; }
# Runs a command, or prints it under --dry-run.
act() {
  changed=1
  if [ $dry = 1 ]; then
    echo "  would run: $*"
  else
    say "running: $*"
    "$@"
  fi
}

packages() {
  local missing=() cmd pkg
  # command → the Debian package that provides it
  for pair in psql:postgresql-client pg_ctlcluster:postgresql mariadbd:mariadb-server \
    mariadb:mariadb-client redis-server:redis-server redis-cli:redis-tools \
    rabbitmq-server:rabbitmq-server erlc:erlang-dev openssl:openssl ip:iproute2 \
    chromium:chromium; do
    cmd=${pair%%:*}
    pkg=${pair#*:}
    if ! command -v "$cmd" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$cmd" ]; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} = 0 ]; then
    say "packages: every one is installed"
    return 0
  fi
  say "packages: missing ${missing[*]}"
  act apt-get update -qq || return 1
  # Chromium alone, and allowed to fail: only the results index test needs
  # it, and on Ubuntu the package is a snap's stand-in that fails without
  # snapd (in a container, say); that must not stop the services' install.
  local services=() browser=0
  for pkg in "${missing[@]}"; do
    if [ "$pkg" = chromium ]; then browser=1; else services+=("$pkg"); fi
  done
  if [ ${#services[@]} -gt 0 ]; then
    act env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${services[@]}" ||
      return 1
  fi
  if [ $browser = 1 ]; then
    act env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium ||
      say "packages: chromium did not install; only harness/tests/index.rs needs it (it then fails naming it)"
  fi
}

pg_as_root() { psql -h 127.0.0.1 -p "$PG_PORT" -U root -d test -qAt "$@" 2>/dev/null; }

postgres() {
  if [ "$(pg_as_root -c 'SELECT 1')" = 1 ]; then
    say "postgres: role root logs in to database test on 127.0.0.1:$PG_PORT"
    return 0
  fi
  if [ $dry = 0 ] && ! $PG_ADMIN -qAt -c 'SELECT 1' >/dev/null 2>&1; then
    say "postgres: no server answers as a superuser ($PG_ADMIN); start it first: scripts/services.sh postgres"
    return 1
  fi
  local hba
  if ! hba=$($PG_ADMIN -qAt -c 'SHOW hba_file' 2>/dev/null) || [ -z "$hba" ]; then
    [ $dry = 1 ] || { say "postgres: cannot read the server's hba_file ($PG_ADMIN)"; return 1; }
    hba="<the server's pg_hba.conf>"
  fi
  if ! grep -qF "$MARK_BEGIN" "$hba" 2>/dev/null; then
    say "postgres: letting root in from 127.0.0.1 and ::1 without a password ($hba)"
    local block
    block=$(printf '%s\nhost all root 127.0.0.1/32 trust\nhost all root ::1/128 trust\n%s\n' "$MARK_BEGIN" "$MARK_END")
    # First, so that no earlier line asks root for a password.
    changed=1
    if [ $dry = 1 ]; then
      echo "  would put at the top of $hba: host all root 127.0.0.1/32 trust; host all root ::1/128 trust"
    else
      # Written whole to a file beside it first; the original is only
      # overwritten once that succeeded (this function runs under `||`,
      # where bash ignores set -e, so every step is checked by hand).
      local new
      new=$(mktemp "$hba.delaybench-XXXXXX") || { say "postgres: cannot write beside $hba"; return 1; }
      if ! { printf '%s\n' "$block" && cat "$hba"; } >"$new" || ! cat "$new" >"$hba"; then
        rm -f "$new"
        say "postgres: could not write $hba"
        return 1
      fi
      rm -f "$new"
    fi
    act $PG_ADMIN -qAt -c 'SELECT pg_reload_conf()' || return 1
  fi
  if [ "$($PG_ADMIN -qAt -c "SELECT 1 FROM pg_roles WHERE rolname = 'root'" 2>/dev/null)" != 1 ]; then
    act $PG_ADMIN -q -c 'CREATE ROLE root SUPERUSER LOGIN' || return 1
  fi
  if [ "$($PG_ADMIN -qAt -c "SELECT 1 FROM pg_database WHERE datname = 'test'" 2>/dev/null)" != 1 ]; then
    act $PG_ADMIN -q -c 'CREATE DATABASE test OWNER root' || return 1
  fi
  if [ $dry = 0 ]; then
    [ "$(pg_as_root -c 'SELECT 1')" = 1 ] ||
      { say "postgres: root still cannot log in on 127.0.0.1:$PG_PORT; see $hba"; return 1; }
    say "postgres: role root logs in to database test on 127.0.0.1:$PG_PORT"
  fi
}

mariadb_setup() {
  if mariadb -uroot -h127.0.0.1 -e 'SELECT 1' test >/dev/null 2>&1; then
    say "mariadb: root logs in over TCP to database test"
    return 0
  fi
  if [ $dry = 0 ] && ! mariadb -uroot -e 'SELECT 1' >/dev/null 2>&1; then
    say "mariadb: root cannot log in over the socket either; start it first (scripts/services.sh mariadb)"
    return 1
  fi
  # Over the socket as the system's root (unix_socket), then TCP with an
  # empty password for root from the loopback addresses.
  local sql="CREATE DATABASE IF NOT EXISTS test;"
  for host in localhost 127.0.0.1 ::1; do
    sql+=" CREATE USER IF NOT EXISTS 'root'@'$host';"
    sql+=" ALTER USER 'root'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;"
    sql+=" GRANT ALL ON *.* TO 'root'@'$host' WITH GRANT OPTION;"
  done
  act mariadb -uroot -e "$sql"
  if [ $dry = 0 ]; then
    mariadb -uroot -h127.0.0.1 -e 'SELECT 1' test >/dev/null 2>&1 ||
      { say "mariadb: root still cannot log in over TCP"; return 1; }
    say "mariadb: root logs in over TCP to database test"
  fi
}

status=0
for step in "${steps[@]}"; do
  case "$step" in
    packages) packages || status=1 ;;
    postgres) postgres || status=1 ;;
    mariadb) mariadb_setup || status=1 ;;
  esac
done
if [ $dry = 1 ] && [ $changed = 1 ]; then
  echo "setup: run as root to do this: sudo bash scripts/setup.sh"
fi
exit $status
