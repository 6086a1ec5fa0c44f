#!/usr/bin/env bash
# The README's test command (make test). On a fresh Debian machine it installs what the
# tests need (redis-server, PostgreSQL server binaries, Chromium), then runs gofmt, go vet
# and go test -race — twice for the packages that talk to Redis: against a private Redis per
# test, then against a shared Redis Cluster (WR_TEST_REDIS=cluster). WR_TEST_PASSES chooses
# the passes: "single cluster" (the default), "single" or "cluster" (make test-cluster). Every test starts its own private Redis / PostgreSQL (or the test binary's one
# cluster) on free loopback ports in temporary directories and stops them; nothing is left
# running.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need+=(redis-server)
# redis-cli creates the test cluster (redis-cli --cluster create); Debian ships it in redis-tools.
command -v redis-cli >/dev/null 2>&1 || [ -x /usr/bin/redis-cli ] || need+=(redis-tools)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
# The browser tests run in Chromium's headless shell (half the CPU of the full browser; the
# full one stays for the one test that needs browser notifications).
[ -x /usr/bin/chromium-headless-shell ] || need+=(chromium-headless-shell)
# Japanese and Korean glyphs for the screenshots of the language tests (small packages:
# 3.5 MB + 1.6 MB; fonts-noto-cjk would be 56 MB, 91 MB installed).
fc-list :lang=ja 2>/dev/null | grep -q . || need+=(fonts-ipafont-gothic)
fc-list :lang=ko 2>/dev/null | grep -q . || need+=(fonts-wqy-microhei)
# Arabic and Hebrew glyphs for the right-to-left screenshots (1 MB, both scripts).
{ fc-list :lang=ar | grep -q . && fc-list :lang=he | grep -q .; } 2>/dev/null || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  echo "test.sh: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts a system redis-server on install; the tests do not use it (they start
# private servers on free ports), so it is left alone.

# nginx for the proxy test (server/TestBehindNginx runs deploy/nginx.conf for real). Installing
# Debian's nginx package would also start a system nginx on port 80, so the binary is taken
# out of the package instead (apt-get download + dpkg -x into a cache directory).
if [ -z "${WR_TEST_NGINX:-}" ]; then
  if command -v nginx >/dev/null 2>&1; then
    WR_TEST_NGINX=$(command -v nginx)
  elif [ -x /usr/sbin/nginx ]; then
    WR_TEST_NGINX=/usr/sbin/nginx
  else
    nginx_dir=${XDG_CACHE_HOME:-$HOME/.cache}/waitroom/nginx
    if [ ! -x "$nginx_dir/usr/sbin/nginx" ]; then
      echo "test.sh: fetching Debian's nginx package (binary only, no service)"
      SUDO=""
      [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      dl=$(mktemp -d)
      chmod 0755 "$dl" # apt's download sandbox user must be able to write here
      (cd "$dl" && { apt-get download nginx >/dev/null 2>&1 || { $SUDO apt-get update -qq && apt-get download nginx >/dev/null 2>&1; }; })
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libpcre2-8-0 libssl3 zlib1g libcrypt1 >/dev/null
      mkdir -p "$nginx_dir"
      dpkg -x "$dl"/nginx_*.deb "$nginx_dir"
      rm -rf "$dl"
    fi
    WR_TEST_NGINX=$nginx_dir/usr/sbin/nginx
  fi
fi
export WR_TEST_NGINX
"$WR_TEST_NGINX" -v

# axe-core for the accessibility test (server/TestJourneyA11yStates): the npm package at a pinned
# version, unpacked into a cache directory (npm install when npm is there, else the same
# tarball from the npm registry, checked against its published sha1). The test fails without it.
axe_version=4.10.2
axe_sha1=85228e3e1d8b8532a27659b332e39b7fa0e022df
if [ -z "${WR_TEST_AXE:-}" ]; then
  axe_dir=${XDG_CACHE_HOME:-$HOME/.cache}/waitroom/axe-core-$axe_version
  WR_TEST_AXE=$axe_dir/node_modules/axe-core/axe.min.js
  if [ ! -f "$WR_TEST_AXE" ]; then
    echo "test.sh: fetching axe-core $axe_version from the npm registry"
    mkdir -p "$axe_dir"
    if command -v npm >/dev/null 2>&1; then
      npm install --prefix "$axe_dir" --no-save --no-audit --no-fund --ignore-scripts "axe-core@$axe_version" >/dev/null
    else
      tgz=$(mktemp)
      curl -fsSL -o "$tgz" "https://registry.npmjs.org/axe-core/-/axe-core-$axe_version.tgz"
      echo "$axe_sha1  $tgz" | sha1sum -c --quiet -
      mkdir -p "$axe_dir/node_modules/axe-core"
      tar -xzf "$tgz" -C "$axe_dir/node_modules/axe-core" --strip-components=1
      rm -f "$tgz"
    fi
  fi
fi
export WR_TEST_AXE

# -trimpath: compiled packages and test binaries do not embed this checkout's directory, so
# the Go build cache serves every clone of the repository (CI's fresh clone included), not
# only the directory that filled it. -ldflags=-w: the test binaries (and the server binaries
# tests build) carry no DWARF tables — stack traces and race reports come from the symbol
# table, not DWARF — which takes a third off each link (server's race test binary: 8.2 →
# 5.7 CPU-seconds), and the command links some forty binaries.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath -ldflags=-w"
# The browser tests save no screenshots here (WR_SCREENSHOTS=off; a failed journey still saves
# its page): the ~170 captures cost 40–60 CPU-seconds of Chromium and are for a person to look
# at, not a check. make screenshots runs the browser tests with them (docs/TESTING.md).
export WR_SCREENSHOTS="${WR_SCREENSHOTS:-off}"
echo "test.sh: gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "test.sh: go vet"
go vet ./...
# The Kubernetes manifests (deploy/k8s, a module of its own so the root's dependencies stay
# short): decoded strictly into the Kubernetes API types and checked against server/config.go.
echo "test.sh: Kubernetes manifests"
(cd deploy/k8s && go vet ./... && go test -count=1 ./...)
# The passes below each have their own log, printed pass by pass when all have ended. Their
# tests own their backends (a private Redis per test or a cluster lent from each test
# binary's pool, a database per test in each binary's PostgreSQL), so passes may overlap.
# Inside a package, tests run in parallel (-parallel 8; serial tests say why in a comment),
# and the packages of a pass run four at a time (-p 4). Builds are shared through the Go
# build cache. The order (measured on 2 cores, docs/TESTING.md "How long it takes"):
#   - single, then journeys (both keep the 2 cores busy);
#   - the two cluster passes together (the queue/stream one mostly waits on clusters forming
#     and failing over: a core and a half idle when it ran alone), and the fuzz runs beside
#     them at normal priority (3,000 executions a target: 27 CPU-seconds alone). Until
#     2026-12-03 the fuzz runs went beside every pass under the idle scheduling policy
#     (SCHED_IDLE): measured, they still slowed every pass by ~10 % (a fresh clone 458 s with
#     them, 402 s without; docs/TESTING.md "How long it takes"); the cluster passes are the
#     ones that leave CPU idle.
# WR_TEST_AT_ONCE=1 starts every pass at once (faster with cores to spare; on 2 cores it
# overloads the machine: measured 652 s and red, see docs/TESTING.md).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'trap - INT TERM; kill 0' INT TERM
WR_OPENAPI_REPORT=$work/openapi-report
: >"$WR_OPENAPI_REPORT"
export WR_OPENAPI_REPORT
# The server binary the end-to-end tests start as processes, built once for every pass (each
# pass's test binary built its own before: a link each).
echo "test.sh: go build ./server (for the tests that start it as a process)"
go build -o "$work/waitroom" ./server
export WR_TEST_SERVER_BIN=$work/waitroom
passes=${WR_TEST_PASSES:-single cluster}
fuzz=${WR_FUZZ_EXECS:-3000}
parallel=${WR_TEST_PARALLEL:-8}
names=()
pids=()
t_all=$SECONDS
busy() { # the machine's busy CPU time so far, in clock ticks (every process, not only ours)
  awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat 2>/dev/null || echo 0
}
busy0=$(busy)
at_once=${WR_TEST_AT_ONCE:-0}
start_bg() { # name command...: run in the background, log to $work/name.log
  local name=$1
  shift
  # times: the CPU time of what the pass ran (its second line: the children's user and system
  # time), printed beside its wall time — the test command is CPU-bound on 2 cores.
  ( t0=$SECONDS; rc=0; "$@" >"$work/$name.log" 2>&1 || rc=$?; times >"$work/$name.times"; echo "$rc $((SECONDS - t0))" >"$work/$name.rc" ) &
  names+=("$name")
  pids+=("$!")
}
wait_pass() { # name...: wait for these passes and say how long each took
  local n i
  for n in "$@"; do
    for i in "${!names[@]}"; do
      if [ "${names[$i]}" = "$n" ]; then
        wait "${pids[$i]}" || true
        echo "test.sh: $n took $(cut -d' ' -f2 "$work/$n.rc") s ($(cpu_secs "$n") CPU-seconds)"
      fi
    done
  done
}
cpu_secs() { # name: the CPU-seconds (user + system) of that pass's processes
  awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%d", n }' "$work/$1.times" 2>/dev/null || echo "?"
}
start_pass() { # name command...: run; wait for it unless WR_TEST_AT_ONCE=1
  start_bg "$@"
  [ "$at_once" = 1 ] || wait_pass "$1"
}
# Short fuzz runs. Budgets are counts of executions, not durations: a duration (-fuzztime 5s)
# races the fuzz coordinator's deadline in Go 1.26 and can fail a target with a bare "context
# deadline exceeded" and no failing input (golang/go#75804, fixed in Go 1.27). One
# instrumented test binary per package serves all of its targets. Each run starts from the
# seed corpus (the f.Add inputs and testdata/fuzz) with a fuzz cache of its own: a corpus
# kept in the Go build cache grew with every run, and replaying it first (the "baseline
# coverage") had come to take longer than the 10,000 executions — a test command whose cost
# grew by itself. A longer run: WR_FUZZ_EXECS (docs/TESTING.md).
fuzz_all() {
  local d t bin
  for d in $(grep -rlE '^func Fuzz' --include='*_test.go' . | xargs -n1 dirname | sort -u); do
    d=${d#./}
    bin=$work/fuzz-$(echo "$d" | tr / -).test
    first=$(grep -hoE '^func Fuzz[A-Za-z0-9_]+' "$d"/*_test.go | head -1 | awk '{print $2}')
    go test -c -fuzz "^${first}\$" -o "$bin" "./$d"
    for t in $(grep -hoE '^func Fuzz[A-Za-z0-9_]+' "$d"/*_test.go | awk '{print $2}'); do
      echo "fuzz $d $t"
      fuzz_one "$d" "$bin" "$t" || return 1
    done
  done
}
fuzz_one() { # dir binary target
  (cd "$1" && "$2" -test.run '^$' -test.fuzz "^${3}\$" -test.fuzztime "${fuzz}x" \
    -test.fuzzcachedir "$work/fuzzcache/$1")
}
# The tests that run in the cluster pass only: on their own Redis Cluster in both modes
# (redistest.StartCluster), against server processes built without the race detector, so a
# single-pass run would repeat the cluster pass's run exactly (TestClusterMasterFailover: ~25 s
# alone; serial until 2026-12-03, when every parallel test of its package waited for it).
cluster_only='TestClusterMasterFailover'
if [[ " $passes " != *" cluster "* ]]; then cluster_only='^$'; fi
if [[ " $passes " == *" single "* ]]; then
  echo "test.sh: go test -race against a private Redis per test (the single pass)"
  start_pass single env WR_TEST_REDIS=single go test -race -count=1 -timeout 30m -p 4 -parallel "$parallel" -skip "^TestJourney|^($cluster_only)\$" ./...
  # The journey suite (server/journey_*_test.go): each journey one test driving real Chromium
  # through the pages as a person would, axe-core at every state it passes, screenshots in
  # screenshots/journeys/<test>/. Its own run so its lines are printed together. Alone it
  # takes ~120 s and both cores (~230 busy CPU-seconds, Chromium ~170 of them); beside the
  # cluster passes every pass took twice as long and failed (2026-12-02, 734 s). The page
  # tests (TestBrowser*) stay in the single pass: in a pass of their own with the journeys
  # (and without the race detector) the two passes took as long as before, 410–440 s against
  # 425 s (2026-12-03) — beside the race-instrumented packages they fill the cores those
  # leave idle.
  echo "test.sh: the journey suite"
  start_pass journeys env WR_OPENAPI_REPORT="$WR_OPENAPI_REPORT-journeys" WR_TEST_REDIS=single go test -race -count=1 -timeout 30m -parallel "$parallel" -run '^TestJourney' -v ./server
fi
# The packages that talk to Redis (queue, stream, branding, autorate, the end-to-end server tests) once more
# against a real Redis Cluster: WR_TEST_REDIS=cluster makes redistest.Start(t) lend each test
# a whole cluster (3 masters + 3 replicas on loopback) from its test binary's
# pool (grown on demand, clusters started one at a time), emptied first, and checks every command the tests' clients send
# against the one-slot rule (queue/redistest). Tests that kill, pause or restart their Redis
# keep a private server (redistest.Single()). Left out of this pass: the browser tests
# (TestBrowser*, TestJourney*: the same server code through Chromium, no other Redis
# commands) and the server tests named in single_only below. The server's tests
# run here without the race detector: the single pass runs the same server code under it, and
# the code that differs on a cluster (queue's cluster clients, sharded pub/sub, topology
# reloads, WAIT) runs under it in this pass's queue and stream tests.
# The server tests that the cluster pass leaves out because against a cluster they would only
# repeat the single pass (each ran there, under the race detector): those whose Redis is a
# private server in both modes (redistest.Single / WithAOF: they stop, pause or restart it),
# or none (the zero-config in-process Redis); those whose subject is HTTP, the process, the
# logs or PostgreSQL, never a Redis command's route (framing, hostile clients, listening
# addresses, pprof, CORS, the access log, secrets in logs, the CLI,
# the OpenAPI document, strict bodies, token formats, charts drawn in Chromium, PostgreSQL
# going away); and TestAutoRateFindsTheKnee (the controller against a PostgreSQL backend; its
# Redis side runs in autorate's TestAutoRate* here). Every other server test — and any new
# one — runs in both passes (docs/TESTING.md, "The passes").
single_only='TestAutoRateFindsTheKnee|TestFailOpen|TestRedisRestart|TestStalledRedisFailsFast|TestHealthcheckAgainstARealInstance|TestAdminTokenKeptBetweenStarts'
single_only+='|TestAccessLog|TestAmbiguousFramingRefused|TestIncompleteRequestsAreClosed|TestHostileClients|TestCrossOriginRules|TestSmallerHardeningPoints|TestBehindNginx|TestListensOnlyWhereWRAddrSays|TestPprofOnItsOwnAddress|TestMetricsAtStart|TestNoSecretsInLogs'
single_only+='|TestCLI[A-Za-z]*|TestOpenAPIDocument|TestAdminStrictBodies|TestAdminValuesNeverAnswer500|TestMixedTokenFormats|TestReportChartLabelsNeverOverlap'
single_only+='|TestPostgresDown|TestAuditWithPostgresDown|TestHistoryWhilePostgresIsDown|TestStartWaitsForPostgres|TestWaitPostgres[A-Za-z]*'
fuzz_done=0
if [[ " $passes " == *" cluster "* ]]; then
  echo "test.sh: go test against a Redis Cluster (WR_TEST_REDIS=cluster; queue, stream and the nouns beside the queue with -race), two passes side by side"
  start_bg cluster-queue-stream env WR_OPENAPI_REPORT= WR_TEST_REDIS=cluster go test -race -count=1 -timeout 30m -parallel "$parallel" ./queue/... ./stream/... ./trust/... ./topology/... ./branding/... ./autorate/...
  if [ "$fuzz" != "0" ]; then
    echo "test.sh: short fuzz runs (${fuzz} executions per target, beside the cluster passes; a longer run: see docs/TESTING.md)"
    start_bg fuzz fuzz_all
    fuzz_done=1
  fi
  start_pass cluster-server env WR_OPENAPI_REPORT= WR_TEST_REDIS=cluster go test -count=1 -timeout 30m -parallel "$parallel" -skip "^TestBrowser|^TestJourney|^($single_only)\$" ./server/...
  [ "$at_once" = 1 ] || wait_pass cluster-queue-stream
  [ "$at_once" = 1 ] || [ "$fuzz_done" = 0 ] || wait_pass fuzz
fi
if [ "$fuzz" != "0" ] && [ "$fuzz_done" = 0 ]; then
  echo "test.sh: short fuzz runs (${fuzz} executions per target; a longer run: see docs/TESTING.md)"
  start_pass fuzz fuzz_all
fi
failed=0
for i in "${!names[@]}"; do
  wait "${pids[$i]}" || true
done
for name in "${names[@]}"; do
  read -r rc secs <"$work/$name.rc"
  echo "== test.sh: $name: $([ "$rc" -eq 0 ] && echo passed || echo "FAILED (exit $rc)") in $secs s, $(cpu_secs "$name") CPU-seconds"
  if [ "$rc" -ne 0 ]; then
    failed=1
    cat "$work/$name.log"
  elif [ "$name" = journeys ]; then
    grep -E '^\s*(--- |PASS|ok )|axe-core:' "$work/$name.log" || true
  elif [ "$name" = fuzz ]; then
    grep -c '^fuzz ' "$work/$name.log" | sed 's/$/ fuzz targets run/' || true
  else
    grep -E '^(ok|FAIL|---) ' "$work/$name.log" || true
  fi
done
# Each pass's server test binary writes its own count (the single pass's, the journeys').
if [ -s "$WR_OPENAPI_REPORT" ]; then echo "the single pass's $(cat "$WR_OPENAPI_REPORT")"; fi
if [ -s "$WR_OPENAPI_REPORT-journeys" ]; then echo "the journeys' $(cat "$WR_OPENAPI_REPORT-journeys")"; fi
[ "$failed" -eq 0 ] || { echo "test.sh: FAILED after $SECONDS s (the machine busy $((($(busy) - busy0) / $(getconf CLK_TCK))) CPU-seconds meanwhile)"; exit 1; }
echo "test.sh: all green in $SECONDS s (the passes together: $((SECONDS - t_all)) s; the machine busy $((($(busy) - busy0) / $(getconf CLK_TCK))) CPU-seconds meanwhile, on $(nproc) cores)"
