#!/usr/bin/env bash
# Makes sure the services the tests need are up on 127.0.0.1, starting any
# that is installed locally but stopped. Fails naming the service and how to
# start it when it cannot. Usage: scripts/services.sh [postgres] [mariadb] [redis] [rabbitmq]
# (no argument: all four).
# Also, only when named: `redis-cluster` starts a local 3-master Redis Cluster
# on 127.0.0.1:7000-7002 (no replicas, no persistence; redis-zset runs on it
# with --redis redis+cluster://127.0.0.1:7000), `redis-cluster-stop` stops it;
# `rabbitmq-cluster` / `rabbitmq-cluster-stop` start and stop three local
# RabbitMQ nodes on 5681-5683 (scripts/rabbitmq-cluster.sh); `tls` turns TLS
# on for the four (scripts/tls.sh setup: a local CA, and the URLs to use).
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

# The local Redis Cluster: one redis-server per port, each with its own dir
# (nodes.conf lives there, so a restarted node rejoins with its slots, empty:
# no persistence). cluster-node-timeout 2000 ms: a killed master is marked
# failed within ~2 s. cluster-require-full-coverage no: while a master is
# down, the others keep serving their slots, so only the dead master's
# shards stop (Redis' default would stop the whole cluster).
CLUSTER_PORTS=(7000 7001 7002)
CLUSTER_DIR=${DELAYBENCH_REDIS_CLUSTER_DIR:-/var/lib/delaybench/redis-cluster}

cluster_node_start() { # port
  local port=$1 dir="$CLUSTER_DIR/$1"
  mkdir -p "$dir"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --cluster-require-full-coverage no --save "" --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" >/dev/null
}

cluster_state() { # port
  redis-cli -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p'
}

redis_cluster() {
  local port how='scripts/services.sh redis-cluster (needs redis-server and redis-cli), or: docker compose --profile cluster up -d --wait'
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
    { echo "error: redis-server/redis-cli not installed; $how" >&2; exit 1; }
  if [ "$(cluster_state 7000)" = ok ]; then
    local all_up=1
    for port in "${CLUSTER_PORTS[@]}"; do port_open "$port" || all_up=0; done
    if [ $all_up = 1 ]; then
      echo "services: redis-cluster is up on 127.0.0.1:7000-7002 (cluster_state:ok)"
      return 0
    fi
  fi
  for port in "${CLUSTER_PORTS[@]}"; do
    if port_open "$port"; then
      echo "services: redis-cluster node $port is up"
    else
      echo "services: redis-cluster node $port is down; starting it in $CLUSTER_DIR/$port"
      cluster_node_start "$port" || { echo "error: redis-server on port $port did not start; see $CLUSTER_DIR/$port/redis.log" >&2; exit 1; }
      wait_port "$port" 30 || { echo "error: redis-server on port $port did not open it; see $CLUSTER_DIR/$port/redis.log" >&2; exit 1; }
    fi
  done
  # Formed once: after that every node keeps its slots in nodes.conf.
  local known
  known=$(redis-cli -p 7000 cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')
  if [ "${known:-1}" -lt ${#CLUSTER_PORTS[@]} ]; then
    echo "services: forming the cluster (3 masters, no replicas)"
    redis-cli --cluster create 127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002 \
      --cluster-replicas 0 --cluster-yes >/dev/null ||
      { echo "error: redis-cli --cluster create failed; stop and wipe with: scripts/services.sh redis-cluster-stop && rm -rf $CLUSTER_DIR" >&2; exit 1; }
  fi
  local i
  for ((i = 0; i < 300; i++)); do
    local all_ok=1
    for port in "${CLUSTER_PORTS[@]}"; do [ "$(cluster_state "$port")" = ok ] || all_ok=0; done
    if [ $all_ok = 1 ]; then
      echo "services: redis-cluster started on 127.0.0.1:7000-7002 (cluster_state:ok)"
      return 0
    fi
    sleep 0.1
  done
  echo "error: the Redis Cluster on 127.0.0.1:7000-7002 did not reach cluster_state:ok within 30 s;" >&2
  echo "  see $CLUSTER_DIR/700N/redis.log; wipe and start again with:" >&2
  echo "  scripts/services.sh redis-cluster-stop && rm -rf $CLUSTER_DIR && scripts/services.sh redis-cluster" >&2
  exit 1
}

redis_cluster_stop() {
  local port
  for port in "${CLUSTER_PORTS[@]}"; do
    if port_open "$port"; then
      redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
      echo "services: redis-cluster node $port stopped"
    else
      echo "services: redis-cluster node $port was not running"
    fi
  done
}

for service in "${wanted[@]}"; do
  case "$service" in
    postgres)
      ensure postgres 5432 \
        'command -v pg_ctlcluster && pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start' \
        'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start'
      ;;
    mariadb)
      # As the mysql user: Debian's configuration leaves that to systemd's
      # unit (its `user = mysql` is commented out), and mariadbd refuses
      # to run as root; its socket directory is made by the unit too.
      ensure mariadb 3306 \
        'test -x /usr/sbin/mariadbd && install -d -o mysql -g mysql /run/mysqld && start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql' \
        'install -d -o mysql -g mysql /run/mysqld && start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql'
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
    redis-cluster)
      redis_cluster
      ;;
    redis-cluster-stop)
      redis_cluster_stop
      ;;
    rabbitmq-cluster)
      "$(dirname "$0")/rabbitmq-cluster.sh" start
      ;;
    rabbitmq-cluster-stop)
      "$(dirname "$0")/rabbitmq-cluster.sh" stop
      ;;
    tls)
      bash "$(dirname "$0")/tls.sh" setup
      ;;
    *)
      echo "error: unknown service '$service'; known: postgres mariadb redis rabbitmq redis-cluster redis-cluster-stop rabbitmq-cluster rabbitmq-cluster-stop tls" >&2
      exit 2
      ;;
  esac
done
