#!/usr/bin/env bash
# Starts the servers the tests talk to (Redis, PostgreSQL, MariaDB) when they are not already up.
set -uo pipefail
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_up() { for _ in $(seq 1 60); do up "$1" && return 0; sleep 0.5; done; echo "port $1 did not come up" >&2; return 1; }
need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v pg_ctlcluster >/dev/null || need_apt+=(postgresql)
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
if ! up 6379; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_up 6379
fi
if ! up 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  wait_up 5432
  su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname='test'\" | grep -q 1 || createdb test" || true
fi
if ! up 3306; then
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_up 3306
  mariadb -uroot -e "CREATE DATABASE IF NOT EXISTS test" || true
fi
exit 0
