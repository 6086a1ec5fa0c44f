#!/usr/bin/env bash
# The README's test command (make test). On a fresh Debian machine it installs what the
# tests need (redis-server, PostgreSQL server binaries, Chromium), then runs gofmt, go vet
# and go test -race. Every test starts its own private Redis / PostgreSQL on free loopback
# ports in temporary directories and stops them itself; nothing is left running.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  echo "test.sh: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts a system redis-server on install; the tests do not use it (they start
# private servers on free ports), so it is left alone.

echo "test.sh: gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "test.sh: go vet"
go vet ./...
echo "test.sh: go test -race"
go test -race -count=1 -timeout 15m ./...
# Fuzz budgets are counts of executions, not durations: a duration (-fuzztime 5s) races the
# fuzz coordinator's deadline in Go 1.26 and can fail a target with a bare "context deadline
# exceeded" and no failing input (golang/go#75804, fixed in Go 1.27). A count has no deadline.
fuzz=${WR_FUZZ_EXECS:-40000}
if [ "$fuzz" != "0" ]; then
  echo "test.sh: short fuzz runs (${fuzz} executions each; a longer run: see README)"
  for f in $(grep -rlE '^func Fuzz' --include='*_test.go' . || true); do
    for t in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | awk '{print $2}'); do
      go test -run '^$' -fuzz "^${t}\$" -fuzztime "${fuzz}x" "./$(dirname "${f#./}")"
    done
  done
fi
echo "test.sh: all green"
