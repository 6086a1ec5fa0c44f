#!/usr/bin/env bash
# history.sh — a bounded run of the queue history (package analytics) against two local
# instances: buyers join through both, wait (polling status), and then buy, let their token
# lapse, give up their place (DELETE ticket) or walk away (abandoned after WR_GRACE). At the
# end, once the queue has rested and its last step is recorded, it prints the history's
# totals next to the summed /metrics counters of both instances, saves the report JSON and
# CSV, and parses the CSV (every row as wide as the header).
#
# Starts its own redis-server, PostgreSQL (initdb in a temporary directory) and two server
# processes on loopback, and stops exactly those at the end (also on Ctrl-C).
#
#   k6/history.sh                      # 10 minutes
#   HISTORY_SECONDS=60 k6/history.sh   # shorter
#
# Env: HISTORY_SECONDS (600), HISTORY_WORKERS (40 concurrent buyers), HISTORY_WATCHERS (20
# buyers who wait on an SSE stream instead, never buy: their places count in the line, their
# tokens lapse, their streams in sse_connections), HISTORY_RATE (admission
# rate, users/s: 2; below what the buyers ask, so a line forms), HISTORY_OUT (results directory: k6/results/<stamp>-history).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SECONDS_RUN=${HISTORY_SECONDS:-600}
WORKERS=${HISTORY_WORKERS:-40}
WATCHERS=${HISTORY_WATCHERS:-20}
RATE=${HISTORY_RATE:-2}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${HISTORY_OUT:-$ROOT/k6/results/$STAMP-history}
Q=histrun
PG_BIN=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
for tool in go redis-server redis-cli curl jq python3 ss; do
	command -v "$tool" >/dev/null || { echo "history.sh: $tool is missing" >&2; exit 1; }
done
[ -x "$PG_BIN/initdb" ] || { echo "history.sh: PostgreSQL binaries not found (PG_BINDIR=…)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/wr-history.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$OUT"
ADMIN=hist-admin-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET=hist-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
PIDS=()
WORKER_PIDS=()
REDIS_PID=
PG_DIR=

log() { printf '[history %s] %s\n' "$(date +%T)" "$*" >&2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

stop_pid() { # TERM, wait, then KILL — only the given PID
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	for pid in "${WORKER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${WORKER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
	[ -n "$REDIS_PID" ] && stop_pid "$REDIS_PID"
	if [ -n "$PG_DIR" ] && [ -f "$PG_DIR/postmaster.pid" ]; then
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" -m fast -w -t 20 stop >/dev/null 2>&1 || true
	fi
	rm -rf "$WORK"
	log "stopped everything this run started; results in $OUT"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	local p
	for _ in $(seq 200); do
		p=$((10000 + RANDOM % 20000))
		ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
	done
	return 1
}

log "building the server"
go build -o "$WORK/wr" ./server

port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" --loglevel warning >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
REDIS_URL=redis://127.0.0.1:$port/0
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

PG_PORT=$(free_port)
PG_DIR=$WORK/pg
mkdir -p "$PG_DIR"
[ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
chmod 700 "$PG_DIR"
as_pg "$PG_BIN/initdb" -D "$PG_DIR" -U postgres --auth=trust -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1
as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 30 \
	-o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1" start >/dev/null
DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"

URLS=()
for i in 1 2; do
	p=$(free_port)
	env WR_ADDR=127.0.0.1:$p REDIS_URL="$REDIS_URL" DATABASE_URL="$DATABASE_URL" WR_SECRET="$SECRET" \
		WR_ADMIN_TOKEN="$ADMIN" WR_INSTANCE_ID=hist-$i WR_DEMO=false WR_LOG_LEVEL=warn WR_GRACE=10s \
		WR_JOIN_RATE_PER_IP=0 WR_STATUS_RATE_PER_TICKET=0 WR_ORDER_RATE_PER_TICKET=0 WR_ORDER_RATE_GLOBAL=0 \
		WR_STREAMS_PER_IP=100000 WR_SHUTDOWN_TIMEOUT=5s "$WORK/wr" >>"$OUT/server-$i.log" 2>&1 &
	PIDS+=($!)
	URLS+=("http://127.0.0.1:$p")
	for _ in $(seq 600); do curl -fsS -o /dev/null "http://127.0.0.1:$p/readyz" 2>/dev/null && break; sleep 0.1; done
done
log "redis 127.0.0.1:$port, PostgreSQL 127.0.0.1:$PG_PORT, instances ${URLS[*]} (pids ${PIDS[*]})"

adm() { curl -fsS -X "$1" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' ${3:+-d "$3"} "${URLS[0]}$2"; }
adm PUT /admin/api/queues/$Q "{\"rate_per_second\": $RATE, \"token_ttl_seconds\": 20, \"places_per_ip\": 0}" >/dev/null
adm PUT /admin/api/products/histrun-tee '{"name": "Tee", "price": 2500, "stock": 1000000, "queue": "'$Q'"}' >/dev/null

# buyer W: joins through instance W mod 2 and, by a roll of the dice, leaves while waiting
# (15 %), walks away (10 %: stops polling, abandoned after the grace), or waits until
# admitted and then buys (60 %) or lets the token lapse.
buyer() {
	local w=$1 until=$2 base ticket st token roll i
	base=${URLS[$((w % 2))]}
	while [ "$(date +%s)" -lt "$until" ]; do
		ticket=$(curl -fsS -X POST "$base/api/queues/$Q/join" | jq -r .ticket) || { sleep 1; continue; }
		roll=$((RANDOM % 100))
		if [ "$roll" -lt 10 ]; then
			sleep 2
			continue # walks away
		fi
		for ((i = 0; i < 600; i++)); do
			st=$(curl -fsS -H "Authorization: Bearer $ticket" "$base/api/queues/$Q/status" 2>/dev/null) || { sleep 1; continue; }
			[ "$(jq -r .state <<<"$st")" = admitted ] && break
			if [ "$roll" -lt 25 ] && [ "$i" -ge 2 ]; then
				curl -fsS -o /dev/null -X DELETE -H "Authorization: Bearer $ticket" "$base/api/queues/$Q/ticket" || true
				st=
				break
			fi
			sleep 2
		done
		token=
		[ -n "$st" ] && token=$(jq -r '.token // empty' <<<"$st")
		if [ -n "$token" ] && [ "$roll" -lt 85 ]; then
			curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $ticket" -H "X-Admission-Token: $token" \
				-H "Idempotency-Key: $ticket" -H 'Content-Type: application/json' \
				-d '{"product_id": "histrun-tee", "quantity": 1}' "$base/api/orders" || true
		fi
	done
}

# watcher W: joins through instance W mod 2 and waits on the stream (curl, until the end of
# the run); when the stream ends (its token lapsed) it joins again.
watcher() {
	local w=$1 until=$2 base ticket left
	base=${URLS[$((w % 2))]}
	while left=$((until - $(date +%s))) && [ "$left" -gt 0 ]; do
		ticket=$(curl -fsS -X POST "$base/api/queues/$Q/join" | jq -r .ticket) || { sleep 1; continue; }
		curl -sSN --max-time "$left" -H "Authorization: Bearer $ticket" -H 'Accept: text/event-stream' \
			"$base/api/queues/$Q/stream" >/dev/null 2>&1 || true
		sleep 1
	done
}
# The open streams of both instances (/metrics sse_connections), every 2 s: the largest sum.
sse_sampler() {
	local until=$1 max=0 n u v
	while [ "$(date +%s)" -lt "$until" ]; do
		n=0
		for u in "${URLS[@]}"; do
			v=$(curl -fsS "$u/metrics" | awk 'index($0, "sse_connections ") == 1 {print int($2)}')
			n=$((n + ${v:-0}))
		done
		[ "$n" -gt "$max" ] && max=$n && echo "$max" >"$OUT/sse-max.txt"
		sleep 2
	done
}

START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
END=$(($(date +%s) + SECONDS_RUN))
log "$WORKERS buyers for $SECONDS_RUN s at $RATE admissions/s"
for ((w = 0; w < WORKERS; w++)); do
	buyer "$w" "$END" >/dev/null 2>&1 &
	WORKER_PIDS+=($!)
done
for ((w = 0; w < WATCHERS; w++)); do
	watcher "$w" "$END" >/dev/null 2>&1 &
	WORKER_PIDS+=($!)
done
sse_sampler "$END" &
WORKER_PIDS+=($!)
for pid in "${WORKER_PIDS[@]}"; do wait "$pid" || true; done
WORKER_PIDS=()
log "buyers done; waiting for the line to empty, tokens to lapse and the queue to rest"

stat_q() { adm GET /admin/api/stats | jq -c --arg q "$Q" '.queues[] | select(.name == $q) | {waiting, active_tokens, leader}'; }
for _ in $(seq 120); do
	s=$(stat_q)
	[ "$(jq '.waiting + .active_tokens' <<<"$s")" = 0 ] && [ "$(jq -r .leader <<<"$s")" = "" ] && break
	sleep 1
done
log "queue now: $(stat_q)"

metric() { # metric SERIES: summed over both instances
	local u sum=0 v
	for u in "${URLS[@]}"; do
		v=$(curl -fsS "$u/metrics" | awk -v s="$1" 'index($0, s " ") == 1 {print $2}')
		sum=$(python3 -c "print(int($sum + float('${v:-0}')))")
	done
	echo "$sum"
}
hist_totals() {
	adm GET "/admin/api/queues/$Q/history?from=$START&step=60" |
		jq -c '[.points[] | {joined, admitted, abandoned, expired, orders}] |
			{joined: (map(.joined) | add // 0), admitted: (map(.admitted) | add // 0),
			 abandoned: (map(.abandoned) | add // 0), expired: (map(.expired) | add // 0), orders: (map(.orders) | add // 0)}'
}
metric_totals() {
	local l="{queue=\"$Q\"}"
	jq -nc --argjson j "$(metric "queue_enter_total$l")" --argjson a "$(metric "queue_token_issued_total$l")" \
		--argjson b "$(metric "queue_abandoned_total$l")" --argjson e "$(metric "queue_token_expired_total$l")" \
		--argjson o "$(metric 'order_outcomes_total{result="created"}')" \
		'{joined: $j, admitted: $a, abandoned: $b, expired: $e, orders: $o}'
}
# The last step is written 10 s after it ends (and the history reads its minute rows and
# the 10-s rows not yet rolled up): wait until they agree, at most a minute.
for _ in $(seq 60); do
	H=$(hist_totals)
	M=$(metric_totals)
	[ "$H" = "$M" ] && break
	sleep 1
done
{
	echo "run: $SECONDS_RUN s, $WORKERS buyers, rate $RATE/s, from $START"
	printf '%-10s %10s %10s %s\n' counter history metrics ""
	for k in joined admitted abandoned expired orders; do
		h=$(jq ".$k" <<<"$H")
		m=$(jq ".$k" <<<"$M")
		printf '%-10s %10s %10s %s\n' "$k" "$h" "$m" "$([ "$h" = "$m" ] && echo equal || echo DIFFERENT)"
	done
} | tee "$OUT/totals.txt"

adm GET "/admin/api/queues/$Q/report" | jq . >"$OUT/report.json"
curl -fsS -D "$OUT/report.csv.headers" -H "Authorization: Bearer $ADMIN" "${URLS[1]}/admin/api/queues/$Q/report?format=csv" >"$OUT/report.csv"
adm GET "/admin/api/queues/$Q/history?from=$START&step=10" | jq . >"$OUT/history-10s.json"
jq -c '{joined, drawn, admitted, bought, units, abandoned, left, expired, sold_out_at, peak_waiting, peak_waiting_at,
	peak_sse_connections, wait: {count: .wait_seconds.count, p50: .wait_seconds.p50, p95: .wait_seconds.p95, p99: .wait_seconds.p99},
	minutes: (.orders_per_minute | length)}' "$OUT/report.json" | tee "$OUT/report-summary.json"
echo "open streams: peak in the history $(jq .peak_sse_connections "$OUT/report.json"), largest /metrics sse_connections sum seen (every 2 s) $(cat "$OUT/sse-max.txt" 2>/dev/null || echo 0)" |
	tee "$OUT/sse.txt"
python3 - "$OUT/report.csv" <<'EOF' | tee "$OUT/csv-check.txt"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
head, body = rows[0], rows[1:]
bad = [i for i, r in enumerate(body, 2) if len(r) != len(head)]
print(f"csv: header {len(head)} columns ({','.join(head)}); {len(body)} minute rows; rows of another width: {bad or 'none'}")
print("csv sums: joined %d admitted %d orders %d" % tuple(sum(int(r[head.index(c)]) for r in body) for c in ("joined", "admitted", "orders")))
sys.exit(1 if bad else 0)
EOF
grep -c DIFFERENT "$OUT/totals.txt" >/dev/null && { log "history and metrics differ"; exit 1; }
log "history and metrics agree"
