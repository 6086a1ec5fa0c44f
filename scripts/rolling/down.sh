#!/bin/bash
D=/tmp/roll27/run
for n in new old; do [ -f $D/$n.pid ] && kill $(cat $D/$n.pid) 2>/dev/null; done
sleep 1
runuser -u postgres -- pg_ctl -D $D/pg -m fast stop >/dev/null 2>&1
[ -f $D/redis.pid ] && kill $(cat $D/redis.pid) 2>/dev/null
echo down
