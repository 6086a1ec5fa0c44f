#!/usr/bin/env bash
# k6/bench.sh — the waiting room's benchmark suite (`make bench`). See k6/README.md.
#
# Builds the server and the swarm, starts a private redis-server and PostgreSQL and the
# server instance(s) on free loopback ports, runs the suite, prints the results and always
# stops what it started (by PID). Everything targets 127.0.0.0/8, is bounded in count and
# time, and ends by itself.
#
#   BENCH_SIZE=default   (make bench) a few minutes: push 500, push vs poll 5,000,
#                        idle memory at 10,000, k6 join-rate, capacity-knee, spike
#   BENCH_SIZE=big19k    19,000 streams on one instance held ~10 minutes (BENCH_HOLD=9m)
#   BENCH_SIZE=big100k   100,000 streams on 6 instances (BENCH_HOLD=2m)
#   BENCH_SIZE=env       only start the backend and instance(s), print their addresses and
#                        keep them for BENCH_HOLD (default 30m) or until Ctrl-C
#   BENCH_ONLY="swarm500 compare idle10k joingo joinrate knee spike"   run a subset (default size)
#   BENCH_ONLY=fdflood   overload: one instance at its open-file limit (20,000) against 20,000
#                        idle connections that never finish a request; does it live, shed, and
#                        answer /healthz and a new stream once the flood ends? With
#                        BENCH_OLD_BIN=/path/to/older/wr the same against that binary too.
#   BENCH_ONLY=storm     overload: 3 instances under prlimit --nofile=STORM_NOFILE (2000), ~70 %
#                        full of streams, admitting 20/s; the admission leader gets SIGKILL and
#                        its users reconnect to the others; STORM_RUNS (3) times.
#                        (fdflood and storm are not in the default suite.)
#   BENCH_ONLY=draw10000   drop day: 10,000 pre-queue streams on one instance, the start moved to
#                        now; time from that call to every drawn position (p50/p99/max), the
#                        positions a permutation of 1…N matching the published order, the seed
#   BENCH_ONLY=draw100000  the same with 100,000 streams on 6 instances (one holds ~19,300 at
#                        the 20,000 open-file limit); target: every position within 5 s.
#                        DRAW_CLUSTER=1: on a local Redis Cluster (3 masters + 3 replicas), the
#                        pre-queue sharded one per master (WR_PREQUEUE_SHARDS auto)
#   BENCH_ONLY=soldout19000  19,000 waiting streams on one instance, the queue's product set to
#                        stock 0; time from that call to every sold_out event
#   BENCH_ONLY=idlepre   Redis commands/s of an idle queue, no streams: plain (paused) and
#                        scheduled (pre-queue), each with 0, 10,000 and 100,000 places (IDLE_SIZES)
#                        (the drop-day runs are not in the default suite; DRAW_N, SOLDOUT_N
#                        change their sizes)
#   BENCH_ONLY=idlequeues  scale-out: Redis commands/s with 0, 1, 100 and 1,000 empty queues
#                        (IDLEQ_SIZES) on 2 instances, the build before resting (IDLEQ_OLD_REV,
#                        0cb5c6d; IDLEQ_OLD=0 skips it) and this one side by side; per idle queue
#                        = (total − total at 0) / N; target ≤ 2 commands/s per idle queue
#   BENCH_ONLY=spread1000  1,000 busy queues (SPREAD_QUEUES; one place each, rate 0) over 4
#                        instances (SPREAD_INSTANCES): how many each leads once settled;
#                        target: the even share ± 15 %. SPREAD_OLD=1: the old build too
#   BENCH_ONLY=cluster20x1000  20 queues × 1,000 streams (CL_QUEUES, CL_N) over 2 instances on a
#                        local Redis Cluster (k6/cluster.sh: 3 masters + 3 replicas) and the same
#                        on one plain Redis: positions exact, admission p99, commands per tick
#   BENCH_ONLY=waitcost  the failover guarantee's cost on the cluster: the same busy queues
#                        (WAIT_QUEUES 4 × WAIT_N/4 streams, WAIT_RATE 25/s each) with
#                        WR_REDIS_REPLICA_ACKS=0 and =1, WAITCOST_RUNS (2) rounds alternated
#                        (the scale-out runs are not in the default suite)
#   BENCH_ONLY=admit19k  admission → browser at scale (issue 31): ADMIT_SIZES (5000 10000 19000)
#                        streams over ADMIT_INSTANCES (2) instances, one Redis, admitting ADMIT_RATE
#                        (100/s) for ADMIT_WINDOW (60 s) after connecting and 10 s idle; a 500-waiter
#                        probe process (ADMIT_PROBE) in front. Reports admitted p50/p99/max from
#                        issuance (client and probe), the instances' histograms (tick lag and
#                        duration, tick delay, tick handled, priority frame wait, admitted written,
#                        fan-out, socket write), CPU of server / swarm / machine, CPU pressure and
#                        run-queue waits; load average and top before and after each run
#                        (admit-<build>-<n>-<round>.sched). ADMIT_OLD_REV=<commit> builds that
#                        revision too and alternates old/new runs, ADMIT_ROUNDS (1) times
#                        (ADMIT_OLD_BIN / ADMIT_NEW_BIN: prebuilt server binaries instead);
#                        ADMIT_PROFILE=1 takes a CPU profile (ADMIT_PROFILE_S, 20 s) and a 5 s
#                        runtime trace of every instance 5 s into the admission window;
#                        SWARM_NICE=N runs the swarm under nice -n N; ADMIT_CLUSTER=1 runs it all on a
#                        local Redis Cluster (k6/cluster.sh, replica acknowledgements auto = 1)
#                        instead of one Redis. ~2 minutes per run at 19,000.
#   BENCH_PPROF=1        each instance serves the Go profiler on its own free loopback port
#                        (WR_PPROF_ADDR; PPROF_ADDRS lists them, in the order of TARGETS)
#   BENCH_REV=<commit>   build the server from that commit (a temporary git worktree), not from
#                        the working tree (which may hold others' uncommitted edits); the
#                        swarm is always built from the working tree
#   BENCH_K6=0           skip the k6 scripts;  K6=/path/to/k6 to choose the binary
#   BENCH_OUT=dir        where JSON results go (default k6/results/<time>-<size>, git-ignored)
#   BENCH_SERVER_ENV="WR_UPDATE_INTERVAL=3s …"   extra server settings (no spaces inside values)
#   PG_BINDIR=dir        PostgreSQL server binaries (default: newest /usr/lib/postgresql/*/bin)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
SIZE=${BENCH_SIZE:-default}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${BENCH_OUT:-$ROOT/k6/results/$STAMP-$SIZE}
ONLY=${BENCH_ONLY:-swarm500 compare idle10k joingo joinrate knee spike}
# What the suite needs from the machine (command:Debian package).
PG_BIN=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
for tool in go:golang redis-server:redis-server redis-cli:redis-tools curl:curl jq:jq bc:bc ss:iproute2; do
	if ! command -v "${tool%%:*}" >/dev/null; then
		echo "bench.sh: ${tool%%:*} is missing (apt-get install -y ${tool#*:})" >&2
		exit 1
	fi
done
if [ ! -x "$PG_BIN/initdb" ] || [ ! -x "$PG_BIN/postgres" ]; then
	echo "bench.sh: PostgreSQL server binaries not found (apt-get install -y postgresql, or PG_BINDIR=…)" >&2
	exit 1
fi

WORK=$(mktemp -d /tmp/wr-bench.XXXXXX)
chmod 755 "$WORK"
ADMIN_TOKEN=bench-admin-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET=bench-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
SERVER_PIDS=()
REDIS_PID=
CLUSTER_DIR=
REDIS_URL_SRV= # what the instances get as REDIS_URL (set by start_redis / use_cluster)
REDIS_INFO=    # -redis of the swarm: the server(s) whose INFO commandstats are summed
REDIS_REPL=    # -redis-replicas of the swarm
PG_DIR=
PG_PORT=
TARGETS=
mkdir -p "$OUT"

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }

# as_pg runs a PostgreSQL binary as the postgres user when we are root (PostgreSQL
# refuses to run as root).
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stop_pid() { # stop_pid PID [seconds]: TERM, wait, then KILL — only the given PID
	local pid=$1 wait=${2:-10} i
	[ -n "$pid" ] || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < wait * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

stop_servers() {
	local pid jobs=()
	for pid in "${SERVER_PIDS[@]}"; do
		stop_pid "$pid" 12 &
		jobs+=($!)
	done
	for pid in "${jobs[@]}"; do wait "$pid" || true; done # only these: redis is a child too
	SERVER_PIDS=()
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_servers
	stop_pid "$REDIS_PID" 5
	if [ -n "$CLUSTER_DIR" ]; then
		"$ROOT/k6/cluster.sh" stop "$CLUSTER_DIR" >/dev/null 2>&1 || true
	fi
	for wt in "$WORK"/src-*; do
		[ -d "$wt" ] && git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1 || true
	done
	if [ -n "$PG_DIR" ] && [ -f "$PG_DIR/postmaster.pid" ]; then
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" -m immediate -w -t 20 stop >/dev/null 2>&1 || true
	fi
	rm -rf "$WORK"
	log "stopped everything this run started; results in $OUT"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port prints a TCP port nothing listens on (below the ephemeral range, so the
# swarm's outgoing connections cannot take it).
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((10000 + RANDOM % 20000))
		if ! ss -Htln "sport = :$p" | grep -q .; then
			echo "$p"
			return
		fi
	done
	echo "no free port" >&2
	return 1
}

wait_http() { # wait_http URL seconds
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	log "timed out waiting for $1"
	return 1
}

# build_rev REV OUT: the server of commit REV, built in a temporary worktree (removed after).
build_rev() {
	local rev=$1 out=$2 dir
	dir=$WORK/src-$(git rev-parse --short "$rev")
	git worktree add --detach "$dir" "$rev" >/dev/null 2>&1
	(cd "$dir" && go build -o "$out" ./server)
	git worktree remove --force "$dir"
	log "server of $(git rev-parse --short "$rev") built into $out"
}

build() {
	log "building server and swarm"
	if [ -n "${BENCH_REV:-}" ]; then
		build_rev "$BENCH_REV" "$WORK/wr"
	else
		go build -o "$WORK/wr" ./server
	fi
	go build -o "$WORK/swarm" ./k6/swarm
}

start_redis() {
	local port
	port=$(free_port)
	mkdir -p "$WORK/redis"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK/redis" \
		--maxclients 10000 --loglevel warning >"$WORK/redis.log" 2>&1 &
	REDIS_PID=$!
	REDIS_ADDR=127.0.0.1:$port
	REDIS_URL_SRV=redis://$REDIS_ADDR/0
	REDIS_INFO=$REDIS_ADDR
	REDIS_REPL=
	for _ in $(seq 50); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	log "redis-server $(redis-server --version | awk '{print $3}') on $REDIS_ADDR (pid $REDIS_PID, no persistence)"
}

start_pg() {
	local bin=$PG_BIN
	PG_PORT=$(free_port)
	PG_DIR=$WORK/pg
	mkdir -p "$PG_DIR"
	[ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
	chmod 700 "$PG_DIR"
	as_pg "$bin/initdb" -D "$PG_DIR" -U postgres --auth=trust -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1
	as_pg "$bin/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 30 \
		-o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=300" start >/dev/null
	DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
	log "PostgreSQL $($bin/postgres --version | awk '{print $3}') on 127.0.0.1:$PG_PORT (fsync on, defaults)"
}

# start_servers COUNT: identical instances sharing Redis, PostgreSQL and the secret.
# SERVER_BIN (default: the build) and SERVER_NOFILE (an open-file limit set with prlimit,
# which execs the server, so the PID is the server's) change how they start; SERVER_LOG
# names their logs (server-<i>.log by default).
start_servers() {
	local count=$1 i port wrap=() pprof
	TARGETS=
	INSTANCE_IDS=
	PPROF_ADDRS=
	[ -n "${SERVER_NOFILE:-}" ] && wrap=(prlimit --nofile="$SERVER_NOFILE:$SERVER_NOFILE")
	for ((i = 1; i <= count; i++)); do
		port=$(free_port)
		pprof=
		if [ "${BENCH_PPROF:-0}" != 0 ]; then
			pprof=WR_PPROF_ADDR=127.0.0.1:$(free_port)
			PPROF_ADDRS+="${PPROF_ADDRS:+,}${pprof#*=}"
		fi
		env WR_ADDR=127.0.0.1:$port REDIS_URL="$REDIS_URL_SRV" DATABASE_URL="$DATABASE_URL" \
			WR_SECRET="$SECRET" WR_ADMIN_TOKEN="$ADMIN_TOKEN" WR_INSTANCE_ID=bench-$i \
			WR_STREAMS_PER_IP=100000 WR_JOIN_RATE_PER_IP=0 WR_STATUS_RATE_PER_TICKET=0 WR_ORDER_RATE_PER_TICKET=0 WR_ORDER_RATE_GLOBAL=0 \
			WR_DEMO=false WR_LOG_LEVEL=${SERVER_LOG_LEVEL:-warn} WR_SHUTDOWN_TIMEOUT=5s ${BENCH_SERVER_ENV:-} $pprof \
			"${wrap[@]}" "${SERVER_BIN:-$WORK/wr}" >>"$OUT/${SERVER_LOG:-server}-$i.log" 2>&1 &
		SERVER_PIDS+=($!)
		TARGETS+="${TARGETS:+,}http://127.0.0.1:$port"
		INSTANCE_IDS+="${INSTANCE_IDS:+,}bench-$i"
		wait_http "http://127.0.0.1:$port/readyz" 60
	done
	log "$count instance(s): $TARGETS (pids ${SERVER_PIDS[*]})${SERVER_NOFILE:+, open-file limit $SERVER_NOFILE}"
}

# fresh: new server processes on an empty Redis, so one measurement does not inherit
# another's queues, goroutines or heap (seed 003: reset before every measured run).
fresh() {
	stop_servers
	flush_redis
	start_servers "$1"
}

# flush_redis empties the Redis the instances use (every master of a cluster).
flush_redis() {
	local a
	for a in ${REDIS_INFO//,/ }; do
		redis-cli -p "${a#*:}" flushall >/dev/null
	done
}

# use_cluster starts a local Redis Cluster (k6/cluster.sh: 3 masters + 3 replicas) once and
# points the next instances and swarm runs at it; use_plain points them back at the plain one.
use_cluster() {
	if [ -z "$CLUSTER_DIR" ]; then
		CLUSTER_DIR=$WORK/cluster
		"$ROOT/k6/cluster.sh" start "$CLUSTER_DIR" >"$WORK/cluster.env"
		# shellcheck disable=SC1090
		. "$WORK/cluster.env"
		CL_URL=$REDIS_URL CL_MASTERS=$REDIS_MASTERS CL_REPLICAS=$REDIS_REPLICAS
		unset REDIS_URL
		log "Redis Cluster: $CL_URL (replicas $CL_REPLICAS)"
		"$ROOT/k6/cluster.sh" status "$CLUSTER_DIR" >"$OUT/cluster-nodes.txt" 2>&1 || true
	fi
	REDIS_URL_SRV=$CL_URL
	REDIS_INFO=$CL_MASTERS
	REDIS_REPL=$CL_REPLICAS
}

use_plain() {
	REDIS_URL_SRV=redis://$REDIS_ADDR/0
	REDIS_INFO=$REDIS_ADDR
	REDIS_REPL=
}

swarm() { # swarm NAME flags…: one swarm run, JSON to $OUT/NAME.json
	local name=$1
	shift
	local nice=()
	[ -n "${SWARM_NICE:-}" ] && nice=(nice -n "$SWARM_NICE")
	log "swarm $name: ${nice[*]} $*"
	"${nice[@]}" "$WORK/swarm" -targets "$TARGETS" -admin-token "$ADMIN_TOKEN" -redis "$REDIS_INFO" ${REDIS_REPL:+-redis-replicas "$REDIS_REPL"} \
		-out "$OUT/$name.json" -label "$name" "$@" | tee "$OUT/$name.txt"
}

find_k6() {
	K6=${K6:-$(command -v k6 || true)}
	[ -n "$K6" ] || K6=$(go env GOPATH)/bin/k6
	if [ ! -x "$K6" ]; then
		log "k6 not found: installing with 'go install go.k6.io/k6@latest' (a few minutes, once)"
		go install go.k6.io/k6@latest
	fi
	log "k6: $("$K6" version | head -1)"
}

server_cpu() { # total process_cpu_seconds_total of the instances
	local t s=0
	for t in ${TARGETS//,/ }; do
		s=$(echo "$s + $(curl -fsS "$t/metrics" | awk '/^process_cpu_seconds_total /{print $2}')" | bc -l)
	done
	echo "$s"
}

k6run() { # k6run NAME script [env…]: the k6 run, then how the two cores were shared
	local name=$1 script=$2 c0 c1 rc=0
	shift 2
	log "k6 $name ($script)"
	c0=$(server_cpu)
	env BASE_URL="${TARGETS%%,*}" ADMIN_TOKEN="$ADMIN_TOKEN" SUMMARY_JSON="$OUT/$name.json" "$@" \
		/usr/bin/time -f "%e %U %S" -o "$WORK/k6time" \
		"$K6" run --quiet --no-usage-report "k6/$script" >"$OUT/$name.txt" 2>&1 || rc=$?
	c1=$(server_cpu)
	read -r el us sy < <(tail -1 "$WORK/k6time") || true # the first line is "Command exited…" on failure
	printf 'CPU over the run (%.0f s wall, 2 cores = %.0f core-s): server %.1f s, k6 %.1f s, k6 exit %s\n' \
		"${el:-0}" "$(echo "${el:-0} * 2" | bc -l)" "$(echo "${c1:-0} - ${c0:-0}" | bc -l)" "$(echo "${us:-0} + ${sy:-0}" | bc -l)" "$rc" >>"$OUT/$name.txt" || true
	grep -v '^time=.*level=info' "$OUT/$name.txt" || true
}

want() { [[ " $ONLY " == *" $1 "* ]]; }

# running PID: the process exists and is not a zombie (exited, not yet waited for).
running() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $st != Z* ]]
}

# reap PID: REAPED = the exit status of a process of ours that has ended (not in a subshell:
# only this shell can wait for it).
reap() {
	REAPED=0
	wait "$1" 2>/dev/null || REAPED=$?
}

# server_lines NAME: what the instances logged that matters under overload (budgets, accept
# errors, panics, fatal lines), from $OUT/NAME-*.log.
server_lines() {
	grep -h -e 'connection budgets' -e 'accept' -e 'panic' -e '"level":"fatal"' -e '"level":"error"' \
		-e 'too many open files' "$OUT/$1"-*.log 2>/dev/null | cut -c1-400 | sort | uniq -c | sort -rn | head -20 || true
}

# fdflood: one instance at the machine's open-file limit, FLOOD_N idle connections that send
# a request line and never finish it (4 processes, 4 source addresses), held FLOOD_HOLD; then
# how soon /healthz and a new stream answer. With BENCH_OLD_BIN, the same against that binary.
fdflood() {
	local nofile=${FLOOD_NOFILE:-$(ulimit -Hn)} bin name
	for bin in "$WORK/wr" ${BENCH_OLD_BIN:-}; do
		name=fdflood
		[ "$bin" != "$WORK/wr" ] && name=fdflood-old
		stop_servers
		redis-cli -p "${REDIS_ADDR#*:}" flushall >/dev/null
		SERVER_BIN=$bin SERVER_NOFILE=$nofile SERVER_LOG=$name-server SERVER_LOG_LEVEL=info start_servers 1
		log "flood $name: ${FLOOD_N:-20000} idle connections against $TARGETS (pid ${SERVER_PIDS[0]}, $bin, open files $nofile)"
		"$WORK/swarm" -mode flood -targets "$TARGETS" -admin-token "$ADMIN_TOKEN" -out "$OUT/$name.json" -label "$name" \
			-n "${FLOOD_N:-20000}" -procs 4 -src-count 4 -connect-rate "${FLOOD_RATE:-4000}" -duration "${FLOOD_HOLD:-60s}" \
			-server-pid "${SERVER_PIDS[0]}" | tee "$OUT/$name.txt" || true
		if running "${SERVER_PIDS[0]}"; then
			echo "instance after the flood: alive (pid ${SERVER_PIDS[0]})" | tee -a "$OUT/$name.txt"
		else
			reap "${SERVER_PIDS[0]}"
			echo "instance after the flood: EXITED with status $REAPED" | tee -a "$OUT/$name.txt"
		fi
		echo "server log lines (count, line):" | tee -a "$OUT/$name.txt"
		server_lines "$name-server" | tee -a "$OUT/$name.txt"
	done
}

# storm: STORM_INSTANCES (3) instances under prlimit --nofile=STORM_NOFILE, STORM_FILL (0.7)
# of their stream budgets filled, admitting STORM_RATE (20/s); the admission leader gets
# SIGKILL (STORM_KILL: leader or a number) and its users reconnect; STORM_RUNS (3) runs, each on
# new instances and an emptied Redis.
storm() {
	local runs=${STORM_RUNS:-3} nofile=${STORM_NOFILE:-2000} count=${STORM_INSTANCES:-3} i budget n pid
	for ((i = 1; i <= runs; i++)); do
		stop_servers
		redis-cli -p "${REDIS_ADDR#*:}" flushall >/dev/null
		SERVER_NOFILE=$nofile SERVER_LOG=storm-$i-server SERVER_LOG_LEVEL=info start_servers "$count"
		budget=$(curl -fsS "${TARGETS%%,*}/metrics" | awk '/^sse_streams_budget /{print int($2)}')
		# Full to STORM_FILL at the kill: the users admitted (and gone) before it are added.
		n=$(echo "($budget * $count * ${STORM_FILL:-0.7} + ${STORM_RATE:-20} * ${STORM_BEFORE:-10}) / 1" | bc)
		log "storm run $i/$runs: stream budget $budget per instance, $n users (${STORM_FILL:-0.7} of $count × $budget at the kill, + ${STORM_RATE:-20}/s × ${STORM_BEFORE:-10} s admitted before it)"
		swarm "storm-$i" -mode storm -n "$n" -connect-rate "${STORM_CONNECT_RATE:-500}" -rate "${STORM_RATE:-20}" \
			-before "${STORM_BEFORE:-10}s" -duration "${STORM_MAX:-90s}" -hold "${STORM_HOLD:-10s}" -drain 3s \
			-arrivals "${STORM_ARRIVALS:-5}" -arrivals-for "${STORM_ARRIVALS_FOR:-10s}" \
			-kill "${STORM_KILL:-leader}" -pids "$(IFS=,; echo "${SERVER_PIDS[*]}")" -instance-ids "$INSTANCE_IDS" || true
		for pid in "${SERVER_PIDS[@]}"; do
			if running "$pid"; then
				echo "pid $pid: alive" | tee -a "$OUT/storm-$i.txt"
			else
				reap "$pid"
				echo "pid $pid: exited, status $REAPED" | tee -a "$OUT/storm-$i.txt"
			fi
		done
		echo "server log lines (count, line):" | tee -a "$OUT/storm-$i.txt"
		server_lines "storm-$i-server" | tee -a "$OUT/storm-$i.txt"
	done
}

# idlepre: an idle queue's Redis commands/s with no streams open, plain and scheduled (an hour
# ahead: the places are its pre-queue), both at admission rate 0, for each of
# IDLE_SIZES places; every run on a new instance over an emptied Redis. WR_GRACE=1h: the plain
# queue's places hold no stream and would otherwise be abandoned (and swept) after 60 s
# (pre-queue places are not abandoned before the start anyway).
idlepre() {
	local kind n flag
	for kind in plain pre; do
		for n in ${IDLE_SIZES:-0 10000 100000}; do
			flag=
			[ "$kind" = pre ] && flag=-scheduled
			BENCH_SERVER_ENV="WR_GRACE=1h ${BENCH_SERVER_ENV:-}" fresh 1
			swarm "idle-$kind-$n" -mode idlecost -n "$n" $flag -settle 10s -duration "${IDLE_WINDOW:-30s}"
		done
	done
	{
		echo "idle queue, no streams: Redis commands/s over ${IDLE_WINDOW:-30s} (INFO commandstats delta)"
		printf '%-10s %8s %12s %10s %8s %12s\n' queue places "cmds/s" "cmds/tick" "ticks/s" "server CPU"
		for kind in plain pre; do
			for n in ${IDLE_SIZES:-0 10000 100000}; do
				[ -f "$OUT/idle-$kind-$n.json" ] || continue
				jq -r --arg k "$kind" '[$k, .joined, (.window.redis_commands_per_s*10|round/10), (.window.redis_commands_per_tick*100|round/100),
					.admission_ticks_per_s, (.window.server_cpu_cores*10000|round/10000)] | @tsv' "$OUT/idle-$kind-$n.json" |
					awk -F'\t' '{printf "%-10s %8s %12s %10s %8s %12s\n", $1, $2, $3, $4, $5, $6}'
			done
		done
	} | tee "$OUT/idlepre.txt"
}

# log_summary NAME: the instances' warn and error lines of run NAME, counted by message (a
# warning repeated every tick shows as a large count).
log_summary() {
	local f
	for f in "$OUT/$1"-server-*.log; do
		[ -e "$f" ] || continue
		echo "$(basename "$f"): $(grep -c '"level":"\(warn\|error\)"' "$f" || true) warn/error lines"
		grep -h '"level":"\(warn\|error\)"' "$f" | jq -r '"\(.level) \(.message) \(.error // "" | .[0:160])"' 2>/dev/null |
			sort | uniq -c | sort -rn | head -8 || true
	done
}

# run_queues NAME BIN COUNT ENV flags…: new instances (COUNT of BIN, extra settings ENV) over an
# emptied Redis, one swarm run, and a summary of the instances' warnings.
run_queues() {
	local name=$1 bin=$2 count=$3 env=$4
	shift 4
	BENCH_SERVER_ENV="$env ${BENCH_SERVER_ENV:-}" SERVER_BIN=$bin SERVER_LOG=$name-server fresh "$count"
	swarm "$name" "$@" || log "swarm $name failed (exit $?)"
	stop_servers
	log_summary "$name" | tee "$OUT/$name-logs.txt"
}

# idlequeues: Redis commands/s of 0, 1, 100 and 1,000 empty queues on 2 instances, the build
# before resting and this one. Per idle queue = (total − total at 0) / N.
idlequeues() {
	local builds="new" b n bin
	if [ "${IDLEQ_OLD:-1}" != 0 ]; then
		build_rev "${IDLEQ_OLD_REV:-0cb5c6d}" "$WORK/wr-old"
		builds="old new"
	fi
	for b in $builds; do
		bin=$WORK/wr
		[ "$b" = old ] && bin=$WORK/wr-old
		for n in ${IDLEQ_SIZES:-0 1 100 1000}; do
			run_queues "idleq-$b-$n" "$bin" "${IDLEQ_INSTANCES:-2}" "" -mode idlequeues -queues "$n" \
				-settle "${IDLEQ_SETTLE:-20s}" -leader-wait 30s -duration "${IDLEQ_WINDOW:-60s}"
		done
	done
	{
		echo "empty queues on ${IDLEQ_INSTANCES:-2} instances, one plain Redis: Redis commands/s over ${IDLEQ_WINDOW:-60s} after ${IDLEQ_SETTLE:-20s} (INFO commandstats delta, commands inside scripts included)"
		echo "old = ${IDLEQ_OLD_REV:-0cb5c6d}, new = ${BENCH_REV:-the working tree}; per queue = (cmds/s − cmds/s at 0 queues) / queues; target ≤ 2"
		printf '%-5s %6s %11s %10s %9s %10s %10s %10s %8s  %s\n' build queues "cmds/s" "per queue" "ticks/s" "scripts/s" "Redis CPU" "server CPU" leaders "top commands/s"
		for b in $builds; do
			local fixed=
			for n in ${IDLEQ_SIZES:-0 1 100 1000}; do
				f=$OUT/idleq-$b-$n.json
				[ -e "$f" ] || continue
				[ "$n" = 0 ] && fixed=$(jq '.window.redis_commands_per_s' "$f")
				jq -r --arg b "$b" --arg fixed "${fixed:-}" '[$b, .queues, (.window.redis_commands_per_s*10|round/10),
					(if .queues > 0 and $fixed != "" then (((.window.redis_commands_per_s - ($fixed|tonumber)) / .queues)*1000|round/1000) else "-" end),
					.admission_ticks_per_s, (.window.redis_script_runs_per_s*10|round/10), (.window.redis_cpu_cores*1000|round/1000),
					(.window.server_cpu_cores*1000|round/1000), (.leaders.led + .leaders.doubled),
					([.redis_calls_per_s_by_command | to_entries | sort_by(-.value) | .[0:5][] | "\(.key) \(.value*10|round/10)"] | join(", "))] | @tsv' "$f" |
					awk -F'\t' '{printf "%-5s %6s %11s %10s %9s %10s %10s %10s %8s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}'
			done
		done
	} | tee "$OUT/idlequeues.txt"
}

# spread1000: SPREAD_QUEUES busy queues (one place each, rate 0: they never rest) over
# SPREAD_INSTANCES instances; WR_GRACE=1h keeps the places (no stream holds them).
spread1000() {
	local b bin builds="new"
	[ "${SPREAD_OLD:-0}" != 0 ] && { build_rev "${IDLEQ_OLD_REV:-0cb5c6d}" "$WORK/wr-old"; builds="old new"; }
	for b in $builds; do
		bin=$WORK/wr
		[ "$b" = old ] && bin=$WORK/wr-old
		run_queues "spread-$b-${SPREAD_QUEUES:-1000}" "$bin" "${SPREAD_INSTANCES:-4}" "WR_GRACE=1h" -mode spread \
			-queues "${SPREAD_QUEUES:-1000}" -queue-waiters 1 -settle "${SPREAD_SETTLE:-20s}" -leader-wait "${SPREAD_WAIT:-120s}" \
			-duration "${SPREAD_WINDOW:-30s}"
	done
}

# cluster20x1000: CL_QUEUES queues × CL_N/CL_QUEUES streams over 2 instances of this build, on
# the local Redis Cluster and then on the plain Redis.
cluster20x1000() {
	local where
	for where in cluster plain; do
		if [ "$where" = cluster ]; then use_cluster; else use_plain; fi
		run_queues "cl-$where" "$WORK/wr" 2 "" -mode stream -queues "${CL_QUEUES:-20}" -n "${CL_N:-20000}" \
			-connect-rate "${CL_CONNECT_RATE:-2000}" -idle 10s -duration "${CL_WINDOW:-30s}" -rate "${CL_RATE:-10}"
	done
	use_plain
}

# waitcost: the same busy queues on the cluster with WR_REDIS_REPLICA_ACKS=0 and =1,
# WAITCOST_RUNS rounds alternated.
waitcost() {
	local i acks
	use_cluster
	for ((i = 1; i <= ${WAITCOST_RUNS:-2}; i++)); do
		for acks in 0 1; do
			run_queues "wait-acks$acks-$i" "$WORK/wr" 2 "WR_REDIS_REPLICA_ACKS=$acks" -mode stream -queues "${WAIT_QUEUES:-4}" \
				-n "${WAIT_N:-4000}" -connect-rate 2000 -idle 5s -duration "${WAIT_WINDOW:-30s}" -rate "${WAIT_RATE:-25}"
		done
	done
	use_plain
	{
		echo "the same busy queues on the cluster: ${WAIT_QUEUES:-4} queues × $((${WAIT_N:-4000} / ${WAIT_QUEUES:-4})) streams, admitting ${WAIT_RATE:-25}/s each, 2 instances; push window ${WAIT_WINDOW:-30s}"
		printf '%-14s %13s %13s %10s %10s %14s %14s %10s %10s\n' run "tick p50 ms" "tick p99 ms" "cmds/tick" "wait/tick" "admitted p99" "from issue p99" admitted/s unconfirmed
		for f in "$OUT"/wait-acks*-*.json; do
			[ -e "$f" ] || continue
			jq -r --arg n "$(basename "$f" .json)" '(.windows[] | select(.kind == "stream")) as $w | [$n, $w.server_tick_duration.p50_ms, $w.server_tick_duration.p99_ms,
				($w.redis_commands_per_tick*100|round/100), (($w.redis_calls_per_s_by_command.wait // 0) * $w.seconds / ([$w.admission_ticks,1]|max) *100|round/100),
				.latency.admitted.p99_ms, .latency.admitted_from_issue.p99_ms, ($w.admitted_per_s*10|round/10), ($w.replication_unconfirmed // 0)] | @tsv' "$f" |
				awk -F'\t' '{printf "%-14s %13s %13s %10s %10s %14s %14s %10s %10s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
		done
	} | tee "$OUT/waitcost.txt"
}

# sched_of PID: seconds on a CPU and seconds waiting in the run queue, over every thread of PID.
sched_of() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{r += $1; w += $2} END {printf "run %.3f s, run-queue wait %.3f s", r / 1e9, w / 1e9}'
}

# sched_note FILE LABEL: the load average, CPU pressure, the busiest processes now (the box is
# shared), and the run-queue wait so far of redis-server and of each instance.
sched_note() {
	local pid
	{
		echo "--- $2 $(date -u +%T): loadavg $(cat /proc/loadavg); $(head -1 /proc/pressure/cpu 2>/dev/null)"
		top -bn1 -w 200 | sed -n '7,16p'
		echo "redis-server (pid $REDIS_PID): $(sched_of "$REDIS_PID")"
		for pid in "${SERVER_PIDS[@]}"; do echo "instance pid $pid: $(sched_of "$pid")"; done
	} >>"$1"
}

# admit_profile NAME: once the admission window has run 5 s, a CPU profile (ADMIT_PROFILE_S) and
# then a 5 s runtime trace of every instance (BENCH_PPROF). Run in the background.
admit_profile() {
	local a i v
	for _ in $(seq 900); do
		v=$(curl -fsS "${TARGETS%%,*}/metrics" 2>/dev/null | awk '/^sse_admitted_events_total /{print ($2 > 0)}')
		[ "${v:-0}" = 1 ] && break
		sleep 0.2
	done
	sleep 5
	i=0
	for a in ${PPROF_ADDRS//,/ }; do
		i=$((i + 1))
		curl -fsS -o "$OUT/$1-cpu-$i.pprof" "http://$a/debug/pprof/profile?seconds=${ADMIT_PROFILE_S:-20}" &
	done
	wait
	i=0
	for a in ${PPROF_ADDRS//,/ }; do
		i=$((i + 1))
		curl -fsS -o "$OUT/$1-trace-$i.out" "http://$a/debug/pprof/trace?seconds=5" &
	done
	wait
}

# admit19k: admission → browser at ADMIT_SIZES streams over ADMIT_INSTANCES instances, one
# Redis, admitting ADMIT_RATE (issue 31). With ADMIT_OLD_REV the old build runs before the new
# one in each round (A B A B …), so both see the same noise of a shared box.
admit19k() {
	local builds=new b n r bin name pids prof old=$WORK/wr-old new=${ADMIT_NEW_BIN:-$WORK/wr}
	if [ -n "${ADMIT_OLD_BIN:-}" ]; then
		old=$ADMIT_OLD_BIN
		builds="old new"
	elif [ -n "${ADMIT_OLD_REV:-}" ]; then
		build_rev "$ADMIT_OLD_REV" "$old"
		builds="old new"
	fi
	local where="one Redis"
	if [ "${ADMIT_CLUSTER:-0}" != 0 ]; then
		use_cluster # the instances' WR_REDIS_REPLICA_ACKS stays auto: 1 on a cluster
		where="a Redis Cluster (3 masters + 3 replicas, replica acknowledgements 1)"
	fi
	for ((r = 1; r <= ${ADMIT_ROUNDS:-1}; r++)); do
		for n in ${ADMIT_SIZES:-5000 10000 19000}; do
			for b in $builds; do
				bin=$new
				[ "$b" = old ] && bin=$old
				name=admit-$b-$n-$r
				SERVER_BIN=$bin SERVER_LOG=$name-server fresh "${ADMIT_INSTANCES:-2}"
				pids=$(IFS=,; echo "${SERVER_PIDS[*]}")
				sched_note "$OUT/$name.sched" before
				prof=
				if [ "${ADMIT_PROFILE:-0}" != 0 ] && [ -n "$PPROF_ADDRS" ]; then
					admit_profile "$name" &
					prof=$!
				fi
				swarm "$name" -mode stream -n "$n" -probe "${ADMIT_PROBE:-500}" -connect-rate "${ADMIT_CONNECT_RATE:-1000}" \
					-baseline 0 -idle "${ADMIT_IDLE:-10s}" -duration "${ADMIT_WINDOW:-60s}" -rate "${ADMIT_RATE:-100}" -pids "$pids" ||
					log "swarm $name failed (exit $?)"
				[ -n "$prof" ] && { wait "$prof" || true; } # the profiles (never a bare wait: the servers are children too)
				sched_note "$OUT/$name.sched" after
				cat "$OUT/$name.sched"
				stop_servers
			done
		done
	done
	{
		echo "admission → browser: ${ADMIT_INSTANCES:-2} instances, $where, admitting ${ADMIT_RATE:-100}/s for ${ADMIT_WINDOW:-60s}; old = ${ADMIT_OLD_BIN:-${ADMIT_OLD_REV:-none}}, new = ${ADMIT_NEW_BIN:-${BENCH_REV:-the working tree}}"
		echo "ms: client = admitted from issuance (token_expires_at − TTL) to parsed; probe = the same for the ${ADMIT_PROBE:-500} front waiters in their own process;"
		echo "server p99 (all instances): delay = tick message handled, written = admitted written to the socket (both from the admission in Redis), lag/dur = leader's tick lag/duration,"
		echo "handle = tick message to frames queued, prio = priority frame's wait for its writer, fanout = one fan-out's computation; CPU in cores; psi = CPU pressure 'some'; runq = run-queue wait s/s"
		printf '%-20s %22s %22s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %5s %6s %6s %6s\n' run "client p50/p99/max" "probe p50/p99/max" \
			delay written lag dur handle prio fanout write srvCPU swarm busy psi "runqS" runqW cmd/tk admitd
		for f in "$OUT"/admit-*.json; do
			[ -e "$f" ] || continue
			jq -r --arg n "$(basename "$f" .json)" '(.windows[] | select(.kind == "stream")) as $w |
				def f(x): if x == null then "-" else (x*10|round/10|tostring) end;
				def t(s): if s == null then "-" else "\(f(s.p50_ms))/\(f(s.p99_ms))/\(f(s.max_ms))" end;
				def h(s): if s == null or s.n == 0 then "-" else f(s.p99_ms) end;
				[$n, t(.latency.admitted_from_issue), t(.latency.probe_admitted_from_issue),
				 h($w.server_tick_delay), h($w.server_admitted_written), h($w.server_tick_lag), h($w.server_tick_duration),
				 h($w.server_tick_handle), h($w.server_priority_wait), h($w.server_fanout), (if $w.server_write.n == 0 then "-" else ($w.server_write.p99_ms|tostring) end),
				 ($w.server_cpu_cores*100|round/100), ($w.swarm_cpu_cores*100|round/100), ($w.machine_busy_cores*100|round/100),
				 ($w.cpu_pressure_some*100|round/100), (($w.server_runq_wait_per_s // 0)*1000|round/1000), ($w.swarm_runq_wait_per_s*1000|round/1000),
				 ($w.redis_commands_per_tick*100|round/100), .latency.admitted_from_issue.n] | @tsv' "$f" |
				awk -F'\t' '{printf "%-20s %22s %22s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %5s %6s %6s %6s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19}'
		done
	} | tee "$OUT/admit19k.txt"
}

machine() {
	{
		echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "nproc: $(nproc)"
		echo "memory: $(free -g | awk '/Mem:/{print $2 " GiB"}')"
		echo "kernel: $(uname -sr)"
		echo "go: $(go version | awk '{print $3}')"
		echo "redis-server: $(redis-server --version | awk '{print $3}' | tr -d v=)"
		echo "open files: $(ulimit -n)"
		echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)${BENCH_REV:+ (server built from $BENCH_REV)}"
		if [ -n "${BENCH_REV:-}" ]; then
			echo "working tree: $(git status --porcelain 2>/dev/null | wc -l) changed or untracked files (not in the server build: BENCH_REV; the swarm is the tree's)"
		else
			echo "working tree: $(git status --porcelain 2>/dev/null | wc -l) changed or untracked files (uncommitted work is in the build)"
		fi
	} | tee "$OUT/machine.txt"
}

machine
build
start_redis

case $SIZE in
default)
	start_pg
	if want fdflood; then
		fdflood
	fi
	if want storm; then
		storm
	fi
	if want swarm500 || want compare || want idle10k || want joingo; then
		fresh 1
	fi
	if want swarm500; then
		swarm push-500 -mode stream -n 500 -idle 10s -duration 20s -rate 10
	fi
	if want compare; then
		fresh 1
		swarm compare-5000 -mode compare -n 5000 -idle 10s -duration 30s -rate 10
	fi
	if want idle10k; then
		fresh 1
		swarm idle-10000 -mode stream -n 10000 -idle 30s -mem-wait 150s -duration 15s -rate 10
	fi
	if want joingo; then
		fresh 1
		swarm joins-go -mode joins -connect-rate "${JOIN_RATE:-4000}" -duration "${JOIN_DURATION:-20s}"
	fi
	if want draw10000; then
		fresh 1
		swarm "draw-${DRAW_N:-10000}" -mode draw -n "${DRAW_N:-10000}" -connect-rate 2000 -idle 10s -wait "${DROP_WAIT:-60s}"
	fi
	if want draw100000; then
		# One instance holds ~19,300 streams at the open-file limit (20,000, not raisable
		# here): 100,000 streams take 6, as hold-100000 does. DRAW_CLUSTER=1: on a local
		# Redis Cluster, where the pre-queue is sharded (WR_PREQUEUE_SHARDS auto: one per master).
		[ "${DRAW_CLUSTER:-0}" != 0 ] && use_cluster
		fresh 6
		swarm "draw-${DRAW_N:-100000}" -mode draw -n "${DRAW_N:-100000}" -connect-rate 1500 -src-count 6 -procs 7 -idle 10s \
			-wait "${DROP_WAIT:-60s}"
	fi
	if want soldout19000; then
		fresh 1
		swarm "soldout-${SOLDOUT_N:-19000}" -mode soldout -n "${SOLDOUT_N:-19000}" -connect-rate 1000 -idle 10s -wait "${DROP_WAIT:-60s}"
	fi
	if want idlepre; then
		idlepre
	fi
	if want idlequeues; then
		idlequeues
	fi
	if want spread1000; then
		spread1000
	fi
	if want cluster20x1000; then
		cluster20x1000
	fi
	if want waitcost; then
		waitcost
	fi
	if want admit19k; then
		admit19k
	fi
	if [ "${BENCH_K6:-1}" != 0 ] && { want joinrate || want knee || want spike; }; then
		find_k6
		if want joinrate; then
			fresh 1
			k6run join-rate join-rate.js RATE="${JOIN_RATE:-4000}" DURATION="${JOIN_DURATION:-20s}"
		fi
		if want knee; then
			fresh 1
			k6run capacity-knee capacity-knee.js STEPS="${KNEE_STEPS:-25,50,100,200,400}" STEP_DURATION="${KNEE_STEP:-15s}"
		fi
		if want spike; then
			fresh 1
			k6run spike spike.js
		fi
	fi
	;;
big19k)
	start_pg
	start_servers 1
	swarm hold-19000 -mode stream -n 19000 -probe 500 -connect-rate 1000 -idle 60s -mem-wait 150s -duration "${BENCH_HOLD:-9m}" -rate 10
	;;
big100k)
	start_pg
	start_servers 6
	swarm hold-100000 -mode stream -n 100000 -probe 500 -connect-rate 1500 -src-count 6 -procs 7 -idle 30s -mem-wait 150s \
		-duration "${BENCH_HOLD:-2m}" -rate 10
	;;
env)
	start_pg
	start_servers "${BENCH_INSTANCES:-1}"
	echo "TARGETS=$TARGETS REDIS=$REDIS_ADDR DATABASE_URL=$DATABASE_URL ADMIN_TOKEN=$ADMIN_TOKEN" | tee "$OUT/env.txt"
	sleep "${BENCH_HOLD:-30m}" &
	wait $! || true # interruptible: the trap runs at once on Ctrl-C / TERM
	;;
*)
	echo "unknown BENCH_SIZE=$SIZE (default, big19k, big100k, env)" >&2
	exit 2
	;;
esac

log "summary"
for f in "$OUT"/*.json; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .json)
	echo "--- $name"
	if jq -e '.summary' "$f" >/dev/null 2>&1; then
		jq -r '.summary' "$f"
	elif jq -e '.windows' "$f" >/dev/null 2>&1; then
		jq -r '
		  "connected \(.connected)/\(.n) at \(.connects_per_second)/s; memory/waiter (\((.memory_after_idle // .memory).when)) RSS \((.memory_after_idle // .memory).rss_per_waiter_kb) KB, heap in use \((.memory_after_idle // .memory).heap_inuse_per_waiter_kb) KB, goroutines \((.memory_after_idle // .memory).goroutines_per_waiter)",
		  (.windows[] | "  \(.name): server CPU \(.server_cpu_cores*1000|round/1000) cores (\(.server_cpu_us_per_waiter_per_s*100|round/100) µs/waiter/s), Redis \(.redis_commands_per_s|round) cmds/s, \(.redis_commands_per_tick*100|round/100) cmds/tick, machine \(.machine_busy_cores*100|round/100) cores busy"),
		  "  admitted p99 \(.latency.admitted.p99_ms // "-") ms (from issuance \(.latency.admitted_from_issue.p99_ms // "-") ms), position p99 \(.latency.position.p99_ms // "-") ms, errors \([.errors[]] | add // 0), FIFO violations \(.checks.fifo_violations) (\(.checks.fifo_note))"' "$f"
	else
		grep -v -e '^time=' -e '^\[bench' "$OUT/$name.txt" 2>/dev/null || true
	fi
done
