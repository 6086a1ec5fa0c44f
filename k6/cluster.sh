#!/usr/bin/env bash
# k6/cluster.sh — a local Redis Cluster for benchmarks: 3 masters + 3 replicas on free
# loopback ports, no persistence, in a directory of its own.
#
#   k6/cluster.sh start [DIR]   start one (DIR: default a new /tmp/wr-cluster.XXXXXX), wait for
#                               cluster_state:ok on every node and print, as shell assignments:
#                                 CLUSTER_DIR=…     the directory (give it to stop)
#                                 REDIS_URL=redis://127.0.0.1:P1?addr=127.0.0.1:P2&addr=127.0.0.1:P3
#                                                   (go-redis cluster form: the masters)
#                                 REDIS_MASTERS=127.0.0.1:P1,…   REDIS_REPLICAS=127.0.0.1:P4,…
#                               the same lines are in DIR/env.
#   k6/cluster.sh stop DIR      stop exactly the redis-server processes this script started there
#                               (PIDs in DIR/pids, each checked to still be that redis-server on
#                               its port), then remove DIR.
#   k6/cluster.sh status DIR    CLUSTER INFO and CLUSTER NODES of the first node.
#
# Needs redis-server and redis-cli ≥ 7 (Debian: apt-get install -y redis-server redis-tools).
# Settings: CLUSTER_NODE_TIMEOUT (2000 ms), CLUSTER_WAIT (30 s for cluster_state:ok),
# CLUSTER_REPLICAS (1 replica per master; 0: 3 masters alone, for per-master CPU measurements
# on a small machine where 3 more processes share the cores).
# Everything binds 127.0.0.1 only; nothing is written outside DIR.
set -euo pipefail

REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
REDIS_CLI=${REDIS_CLI:-$(command -v redis-cli || echo /usr/bin/redis-cli)}
REPLICAS=${CLUSTER_REPLICAS:-1}
NODES=$((3 * (1 + REPLICAS)))

log() { printf '[cluster %s] %s\n' "$(date +%T)" "$*" >&2; }

# free_port prints a TCP port nothing listens on, whose cluster bus port (+10000) is free
# too, below the ephemeral range.
free_port() {
	local p
	for _ in $(seq 500); do
		p=$((10000 + RANDOM % 12000)) # the bus port (+10000) stays below the ephemeral range
		if ! ss -Htln "sport = :$p" | grep -q . && ! ss -Htln "sport = :$((p + 10000))" | grep -q . &&
			[[ " ${PORTS[*]:-} " != *" $p "* ]]; then
			echo "$p"
			return
		fi
	done
	echo "no free port" >&2
	return 1
}

# ours PID PORT: the process is a redis-server listening on PORT (not a recycled PID).
ours() {
	local cmd
	cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
	[[ $cmd == *redis-server*":$2"* || $cmd == *redis-server*"--port $2"* ]]
}

stop_dir() {
	local dir=$1 pid port i
	[ -f "$dir/pids" ] || { log "no $dir/pids: nothing to stop"; return 0; }
	while read -r pid port; do
		[ -n "$pid" ] || continue
		if ours "$pid" "$port"; then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done <"$dir/pids"
	while read -r pid port; do
		[ -n "$pid" ] || continue
		for ((i = 0; i < 50; i++)); do
			ours "$pid" "$port" || break
			sleep 0.1
		done
		if ours "$pid" "$port"; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done <"$dir/pids"
	rm -rf "$dir"
	log "stopped the cluster of $dir"
}

start() {
	local dir=${1:-} i port pid addrs=() masters=() replicas=() ok
	if [ -z "$dir" ]; then
		dir=$(mktemp -d /tmp/wr-cluster.XXXXXX)
	else
		mkdir -p "$dir"
	fi
	if [ -e "$dir/pids" ]; then
		echo "cluster.sh: $dir/pids exists (a cluster is running there? stop it first)" >&2
		exit 1
	fi
	: >"$dir/pids"
	PORTS=()
	# On a failure before the end, stop what was started.
	trap 'rc=$?; if [ $rc != 0 ]; then log "start failed: stopping what it started"; stop_dir "$dir"; fi' EXIT
	for ((i = 1; i <= NODES; i++)); do
		port=$(free_port)
		PORTS+=("$port")
		mkdir -p "$dir/$port"
		"$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --dir "$dir/$port" --save '' --appendonly no \
			--cluster-enabled yes --cluster-config-file "nodes-$port.conf" \
			--cluster-node-timeout "${CLUSTER_NODE_TIMEOUT:-2000}" --maxclients 10000 \
			--loglevel warning --logfile "$dir/$port/redis.log" --daemonize no >/dev/null 2>&1 &
		pid=$!
		echo "$pid $port" >>"$dir/pids"
		addrs+=("127.0.0.1:$port")
	done
	for port in "${PORTS[@]}"; do
		for ((i = 0; i < 100; i++)); do
			"$REDIS_CLI" -p "$port" ping >/dev/null 2>&1 && break
			sleep 0.1
		done
		"$REDIS_CLI" -p "$port" ping >/dev/null 2>&1 || { log "node $port did not start (see $dir/$port/redis.log)"; exit 1; }
	done
	"$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas "$REPLICAS" --cluster-yes >"$dir/create.log" 2>&1 ||
		{ log "redis-cli --cluster create failed:"; tail -20 "$dir/create.log" >&2; exit 1; }
	for ((i = 0; i < ${CLUSTER_WAIT:-30} * 10; i++)); do
		ok=0
		for port in "${PORTS[@]}"; do
			"$REDIS_CLI" -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && ok=$((ok + 1))
		done
		[ "$ok" = "$NODES" ] && break
		sleep 0.1
	done
	[ "$ok" = "$NODES" ] || { log "cluster_state not ok on every node within ${CLUSTER_WAIT:-30} s"; exit 1; }
	# Every replica attached to its master (replication link up), so WAIT 1 can be met.
	for ((i = 0; REPLICAS > 0 && i < ${CLUSTER_WAIT:-30} * 10; i++)); do
		ok=0
		for port in "${PORTS[@]}"; do
			if "$REDIS_CLI" -p "$port" role 2>/dev/null | head -1 | grep -q master; then
				[ "$("$REDIS_CLI" -p "$port" info replication | tr -d '\r' | awk -F: '/^connected_slaves:/{print $2}')" -ge 1 ] && ok=$((ok + 1))
			else
				"$REDIS_CLI" -p "$port" info replication | tr -d '\r' | grep -q '^master_link_status:up' && ok=$((ok + 1))
			fi
		done
		[ "$ok" = "$NODES" ] && break
		sleep 0.1
	done
	[ "$REPLICAS" = 0 ] || [ "$ok" = "$NODES" ] || { log "replication links not all up within ${CLUSTER_WAIT:-30} s"; exit 1; }
	for port in "${PORTS[@]}"; do
		if "$REDIS_CLI" -p "$port" role | head -1 | grep -q master; then
			masters+=("127.0.0.1:$port")
		else
			replicas+=("127.0.0.1:$port")
		fi
	done
	local url="redis://${masters[0]}?addr=${masters[1]}&addr=${masters[2]}"
	{
		echo "CLUSTER_DIR=$dir"
		echo "REDIS_URL='$url'"
		echo "REDIS_MASTERS=$(IFS=,; echo "${masters[*]}")"
		echo "REDIS_REPLICAS=$(IFS=,; echo "${replicas[*]}")"
	} >"$dir/env"
	trap - EXIT
	log "redis-server $("$REDIS_SERVER" --version | awk '{print $3}' | tr -d v=), 3 masters + $((3 * REPLICAS)) replicas, cluster_state:ok, node timeout ${CLUSTER_NODE_TIMEOUT:-2000} ms (pids: $(awk '{printf "%s ", $1}' "$dir/pids"))"
	cat "$dir/env"
}

case ${1:-} in
start)
	start "${2:-}"
	;;
stop)
	[ -n "${2:-}" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	stop_dir "$2"
	;;
status)
	[ -n "${2:-}" ] && [ -f "$2/pids" ] || { echo "usage: $0 status DIR" >&2; exit 2; }
	port=$(awk 'NR==1{print $2}' "$2/pids")
	"$REDIS_CLI" -p "$port" cluster info | head -7
	"$REDIS_CLI" -p "$port" cluster nodes
	;;
*)
	echo "usage: $0 start [DIR] | stop DIR | status DIR" >&2
	exit 2
	;;
esac
