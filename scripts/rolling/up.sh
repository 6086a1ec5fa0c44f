#!/bin/bash
# Usage: OLD=/path/to/old-binary NEW=/path/to/new-binary scripts/rolling/up.sh (then down.sh).
# NEW_ENV="WR_X=1 WR_Y=2": settings for the new instance only (the release before may not know them).
# Starts one Redis, one PostgreSQL and two instances: old (${OLD:-/tmp/wr-before}) on :18081, new (${NEW:-/tmp/wr-after}) on :18082.
set -eu
D=/tmp/roll27/run; rm -rf $D; mkdir -p $D; chmod 777 $D
RP=16479; PGP=15479
redis-server --port $RP --save '' --appendonly no > $D/redis.log 2>&1 & echo $! > $D/redis.pid
runuser -u postgres -- initdb -D $D/pg -U postgres -A trust > $D/initdb.log 2>&1
runuser -u postgres -- pg_ctl -D $D/pg -o "-p $PGP -k $D -c listen_addresses=127.0.0.1" -l $D/pg.log -w start > /dev/null
runuser -u postgres -- createdb -h 127.0.0.1 -p $PGP -U postgres wr
export REDIS_URL=redis://127.0.0.1:$RP DATABASE_URL="postgres://postgres@127.0.0.1:$PGP/wr?sslmode=disable"
export WR_SECRET=roll27-secret-roll27-secret-roll27-secret WR_ADMIN_TOKEN=adm-roll27-token-0123456789 WR_DEMO=false WR_LOG_LEVEL=warn
export WR_PROXY_HEADER=X-Forwarded-For WR_TRUSTED_PROXIES=127.0.0.1
# FIRST=new starts this release first, so that the release before starts against the
# database this one migrated (the default migrates with the release before, as an upgrade).
start() {
  if [ "$1" = old ]; then WR_ADDR=127.0.0.1:18081 WR_INSTANCE_ID=old ${OLD:-/tmp/wr-before} > $D/old.log 2>&1 & echo $! > $D/old.pid
  else env ${NEW_ENV:-} WR_ADDR=127.0.0.1:18082 WR_INSTANCE_ID=new ${NEW:-/tmp/wr-after} > $D/new.log 2>&1 & echo $! > $D/new.pid; fi
  p=18081; [ "$1" = new ] && p=18082
  for i in $(seq 1 100); do curl -sf http://127.0.0.1:$p/readyz >/dev/null && return; sleep 0.2; done
  echo "$1 did not become ready:"; tail -5 $D/$1.log
}
if [ "${FIRST:-old}" = new ]; then start new; start old; else start old; start new; fi
echo up
