#!/usr/bin/env bash
# Makes sure the services the tests need are up on 127.0.0.1, starting any
# that is installed locally but stopped. Fails naming the service and how to
# start it when it cannot. Usage: scripts/services.sh [postgres] [mariadb] [redis] [rabbitmq]
# (no argument: all four). Not among the four, named only:
# rabbitmq-cluster / rabbitmq-cluster-stop (three local nodes on 5681-5683,
# scripts/rabbitmq-cluster.sh).
set -euo pipefail

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(postgres mariadb redis rabbitmq)

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port seconds
  local i
  for ((i = 0; i < $2; i++)); do
    port_open "$1" && return 0
    sleep 1
  done
  return 1
}

fail() { # name port how
  echo "error: $1 is not reachable on 127.0.0.1:$2 and could not be started here." >&2
  echo "  start it with: $3" >&2
  echo "  or, with Docker: docker compose up -d --wait $1" >&2
  exit 1
}

ensure() { # name port start-command how-to-start
  local name=$1 port=$2 start=$3 how=$4
  if port_open "$port"; then
    echo "services: $name is up on 127.0.0.1:$port"
    return 0
  fi
  echo "services: $name is down on 127.0.0.1:$port; starting it: $start"
  if ! bash -c "$start" >/dev/null 2>&1; then
    fail "$name" "$port" "$how"
  fi
  wait_port "$port" 90 || fail "$name" "$port" "$how"
  echo "services: $name started"
}

for service in "${wanted[@]}"; do
  case "$service" in
    postgres)
      ensure postgres 5432 \
        'command -v pg_ctlcluster && pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start' \
        'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start'
      ;;
    mariadb)
      ensure mariadb 3306 \
        'test -x /usr/sbin/mariadbd && start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd' \
        'start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd'
      ;;
    redis)
      ensure redis 6379 \
        'command -v redis-server && mkdir -p /var/lib/redis /var/log/redis && redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log' \
        'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'
      ;;
    rabbitmq)
      ensure rabbitmq 5672 \
        'command -v rabbitmq-server && rabbitmq-server -detached' \
        'rabbitmq-server -detached'
      ;;
    rabbitmq-cluster)
      "$(dirname "$0")/rabbitmq-cluster.sh" start
      ;;
    rabbitmq-cluster-stop)
      "$(dirname "$0")/rabbitmq-cluster.sh" stop
      ;;
    *)
      echo "error: unknown service '$service'; known: postgres mariadb redis rabbitmq rabbitmq-cluster rabbitmq-cluster-stop" >&2
      exit 2
      ;;
  esac
done
