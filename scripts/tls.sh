#!/usr/bin/env bash
# TLS on the local services, for the TLS tests and a run over TLS.
#
# Usage: scripts/tls.sh setup | urls | env
#   setup  makes (once) a CA, a server certificate for localhost and
#          127.0.0.1 and a client certificate under $DELAYBENCH_TLS_DIR
#          (default /var/lib/delaybench/tls), then turns TLS on:
#            PostgreSQL  its ssl_* settings pointed at them (ALTER SYSTEM and a
#                        reload: no restart; plain connections go on working)
#            MariaDB     ssl_cert/ssl_key/ssl_ca in a marked block of
#                        /etc/mysql/my.cnf, and a restart when they changed
#                        (plain connections go on working)
#            Redis       a TLS-only server of its own on 127.0.0.1:6380 that
#                        asks for a client certificate (beside the plain one on
#                        6379, which tests restart; nothing is persisted)
#            RabbitMQ    a TLS listener on 127.0.0.1:5671 (and, where the
#                        management plugin is enabled, HTTPS on 15671; it is
#                        not enabled here, as the measured broker runs
#                        without it) in a marked block of
#                        /etc/rabbitmq/rabbitmq.conf, and a restart when it
#                        changed (5672 stays as it was)
#          Idempotent: a second run changes nothing and restarts nothing.
#   urls   prints the four TLS URLs (CA, and for Redis the client certificate)
#   env    prints them as the variables the tests read
#          (eval "$(scripts/tls.sh env)" runs the suites over TLS)
# Needs root and openssl; the services installed as scripts/services.sh
# starts them.
set -euo pipefail

DIR=${DELAYBENCH_TLS_DIR:-/var/lib/delaybench/tls}
REDIS_TLS_PORT=6380
MARK_BEGIN="# delaybench-tls begin (scripts/tls.sh; delete the block to turn it off)"
MARK_END="# delaybench-tls end"

say() { echo "tls: $*"; }
die() { echo "error: $*" >&2; exit 1; }

urls() {
  echo "postgres://root@localhost:5432/test?sslmode=verify-full&sslrootcert=$DIR/ca.pem"
  echo "mysql://root@localhost:3306/test?ssl-mode=VERIFY_IDENTITY&ssl-ca=$DIR/ca.pem"
  echo "rediss://localhost:$REDIS_TLS_PORT/?cacert=$DIR/ca.pem&cert=$DIR/client.pem&key=$DIR/client.key"
  echo "amqps://guest:guest@localhost:5671/%2f?cacertfile=$DIR/ca.pem"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # port seconds
  local i
  for ((i = 0; i < $2; i++)); do port_open "$1" && return 0; sleep 1; done
  return 1
}

# (The set-up functions are named tls_*: one named `mariadb` would call
# itself where it means the client.)

# Replaces the marked block of file $1 with the lines on stdin; returns 0
# when the file changed, 1 when it already held them.
put_block() {
  local file=$1 block new
  block=$(cat)
  new=$(mktemp)
  if [ -f "$file" ]; then
    awk -v b="$MARK_BEGIN" -v e="$MARK_END" '$0 == b {skip = 1} !skip {print} $0 == e {skip = 0}' "$file" > "$new"
  fi
  printf '%s\n%s\n%s\n' "$MARK_BEGIN" "$block" "$MARK_END" >> "$new"
  if [ -f "$file" ] && cmp -s "$file" "$new"; then
    rm -f "$new"
    return 1
  fi
  cat "$new" > "$file"
  rm -f "$new"
  return 0
}

certificates() {
  command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
  mkdir -p "$DIR"
  chmod 755 "$DIR"
  if [ -s "$DIR/ca.pem" ] && openssl x509 -checkend 86400 -noout -in "$DIR/server.pem" >/dev/null 2>&1; then
    say "certificates in $DIR are valid"
    return 0
  fi
  say "making a CA, a server certificate (localhost, 127.0.0.1) and a client certificate in $DIR"
  local conf
  conf=$(mktemp)
  openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=delaybench test CA" \
    -keyout "$DIR/ca.key" -out "$DIR/ca.pem" 2>/dev/null
  printf 'subjectAltName = DNS:localhost, IP:127.0.0.1\nextendedKeyUsage = serverAuth\n' > "$conf"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$DIR/server.key" -out "$DIR/server.csr" 2>/dev/null
  openssl x509 -req -in "$DIR/server.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" \
    -CAcreateserial -days 825 -extfile "$conf" -out "$DIR/server.pem" 2>/dev/null
  printf 'extendedKeyUsage = clientAuth\n' > "$conf"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=delaybench-client" \
    -keyout "$DIR/client.key" -out "$DIR/client.csr" 2>/dev/null
  openssl x509 -req -in "$DIR/client.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" \
    -CAcreateserial -days 825 -extfile "$conf" -out "$DIR/client.pem" 2>/dev/null
  # rustls reads PKCS#8 keys; openssl 3 writes them so already.
  rm -f "$conf" "$DIR"/*.csr
  chmod 644 "$DIR"/*.pem "$DIR/client.key"
  chmod 600 "$DIR/ca.key" "$DIR/server.key"
}

# A copy of the server key owned by the service's user (PostgreSQL refuses
# a key others can read).
service_key() { # user subdir
  mkdir -p "$DIR/$2"
  install -m 600 -o "$1" "$DIR/server.key" "$DIR/$2/server.key"
  echo "$DIR/$2/server.key"
}

tls_postgres() {
  local key current
  key=$(service_key postgres postgres)
  current=$(psql -h 127.0.0.1 -U root -d test -Atc "SHOW ssl_cert_file" 2>/dev/null) ||
    die "PostgreSQL does not answer on 127.0.0.1:5432 (scripts/services.sh postgres)"
  if [ "$current" = "$DIR/server.pem" ]; then
    say "PostgreSQL already serves TLS with these certificates"
    return 0
  fi
  psql -h 127.0.0.1 -U root -d test -q \
    -c "ALTER SYSTEM SET ssl_cert_file = '$DIR/server.pem'" \
    -c "ALTER SYSTEM SET ssl_key_file = '$key'" \
    -c "ALTER SYSTEM SET ssl_ca_file = '$DIR/ca.pem'" \
    -c "ALTER SYSTEM SET ssl = on" \
    -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  [ "$(psql -h 127.0.0.1 -U root -d test -Atc "SHOW ssl_cert_file")" = "$DIR/server.pem" ] ||
    die "PostgreSQL did not take the certificates; see its log"
  say "PostgreSQL serves TLS on 127.0.0.1:5432 (reloaded)"
}

tls_mariadb() {
  local key cnf=/etc/mysql/my.cnf
  key=$(service_key mysql mariadb)
  [ -f "$cnf" ] || die "$cnf not found: configure ssl_cert=$DIR/server.pem, ssl_key=$key, ssl_ca=$DIR/ca.pem by hand"
  if put_block "$cnf" <<EOF
[mysqld]
ssl_cert = $DIR/server.pem
ssl_key = $key
ssl_ca = $DIR/ca.pem
EOF
  then
    say "MariaDB: TLS settings written to $cnf; restarting it"
    if port_open 3306; then
      mariadb-admin -uroot -h127.0.0.1 shutdown || die "could not stop MariaDB (mariadb-admin shutdown)"
      # Until the process is gone, not only its port: start-stop-daemon
      # takes one still exiting for a running server and starts none.
      local i
      for ((i = 0; i < 120; i++)); do pgrep -x mariadbd >/dev/null || break; sleep 0.5; done
    fi
    bash "$(dirname "$0")/services.sh" mariadb >/dev/null
  fi
  [ "$(mariadb -uroot -h127.0.0.1 -N -e "SELECT @@have_ssl")" = YES ] ||
    die "MariaDB does not have TLS on (have_ssl is not YES); see /var/log/mysql/error.log"
  say "MariaDB serves TLS on 127.0.0.1:3306"
}

tls_redis() {
  local dir="$DIR/redis"
  if port_open "$REDIS_TLS_PORT"; then
    say "Redis (TLS) is up on 127.0.0.1:$REDIS_TLS_PORT"
    return 0
  fi
  mkdir -p "$dir"
  redis-server --daemonize yes --bind 127.0.0.1 --port 0 --tls-port "$REDIS_TLS_PORT" \
    --tls-cert-file "$DIR/server.pem" --tls-key-file "$DIR/server.key" \
    --tls-ca-cert-file "$DIR/ca.pem" --tls-auth-clients yes \
    --save "" --appendonly no --dir "$dir" --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" ||
    die "redis-server did not start with TLS (is it built with TLS? see $dir/redis.log)"
  wait_port "$REDIS_TLS_PORT" 30 || die "Redis (TLS) did not open 127.0.0.1:$REDIS_TLS_PORT; see $dir/redis.log"
  say "Redis (TLS) started on 127.0.0.1:$REDIS_TLS_PORT (client certificate required)"
}

tls_rabbitmq() {
  local key conf=/etc/rabbitmq/rabbitmq.conf management=""
  key=$(service_key rabbitmq rabbitmq)
  # The management.* keys are the plugin's: a broker without it enabled
  # refuses to boot on them.
  if grep -q rabbitmq_management /etc/rabbitmq/enabled_plugins 2>/dev/null; then
    management="management.ssl.port = 15671
management.ssl.ip = 127.0.0.1
management.ssl.cacertfile = $DIR/ca.pem
management.ssl.certfile = $DIR/server.pem
management.ssl.keyfile = $key"
  fi
  if put_block "$conf" <<EOF
listeners.ssl.default = 127.0.0.1:5671
ssl_options.cacertfile = $DIR/ca.pem
ssl_options.certfile = $DIR/server.pem
ssl_options.keyfile = $key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
$management
EOF
  then
    say "RabbitMQ: TLS listener written to $conf; restarting it"
    if port_open 5672; then
      # `stop` returns once the node is down (the VM gone).
      rabbitmqctl stop >/dev/null 2>&1 || true
      local i
      for ((i = 0; i < 60; i++)); do port_open 5672 || break; sleep 1; done
    fi
    bash "$(dirname "$0")/services.sh" rabbitmq >/dev/null
  fi
  wait_port 5671 90 || die "RabbitMQ did not open its TLS listener on 127.0.0.1:5671; see /var/log/rabbitmq/"
  say "RabbitMQ serves TLS on 127.0.0.1:5671${management:+ (management API: https://localhost:15671)}"
}

case "${1:-}" in
  setup)
    [ "$(id -u)" = 0 ] || die "setup needs root (it writes the services' configuration)"
    certificates
    tls_postgres
    tls_mariadb
    tls_redis
    tls_rabbitmq
    say "done; the URLs:"
    urls | sed 's/^/  /'
    ;;
  urls) urls ;;
  env)
    urls | {
      read -r pg; read -r my; read -r redis; read -r amqp
      printf 'export DELAYBENCH_PG_URL=%q DELAYBENCH_MYSQL_URL=%q DELAYBENCH_REDIS_URL=%q DELAYBENCH_AMQP_URL=%q\n' \
        "$pg" "$my" "$redis" "$amqp"
    }
    ;;
  *)
    echo "usage: scripts/tls.sh setup | urls | env" >&2
    exit 2
    ;;
esac
