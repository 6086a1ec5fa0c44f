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
# Japanese and Korean glyphs for the screenshots of the language tests (small packages:
# 3.5 MB + 1.6 MB; fonts-noto-cjk would be 56 MB, 91 MB installed).
fc-list :lang=ja 2>/dev/null | grep -q . || need+=(fonts-ipafont-gothic)
fc-list :lang=ko 2>/dev/null | grep -q . || need+=(fonts-wqy-microhei)
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

# axe-core for the accessibility test (server/TestBrowserA11y*): the npm package at a pinned
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
WR_OPENAPI_REPORT=$(mktemp)
export WR_OPENAPI_REPORT
passes=${WR_TEST_PASSES:-single cluster}
if [[ " $passes " == *" single "* ]]; then
  echo "test.sh: go test -race"
  t0=$SECONDS
  WR_TEST_REDIS=single go test -race -count=1 -timeout 15m -skip '^TestJourney' ./...
  echo "test.sh: go test -race took $((SECONDS - t0)) s"
  # The journey suite (server/journey_*_test.go): each journey one test driving real Chromium
  # through the pages as a person would, axe-core at every state it passes, screenshots in
  # screenshots/journeys/<test>/. Timed on its own (budget: 150 s for all journeys).
  echo "test.sh: the journey suite"
  t0=$SECONDS
  jlog=$(mktemp)
  jrc=0
  WR_OPENAPI_REPORT= WR_TEST_REDIS=single go test -race -count=1 -timeout 10m -parallel 3 -run '^TestJourney' -v ./server >"$jlog" 2>&1 || jrc=$?
  if [ "$jrc" -ne 0 ]; then cat "$jlog"; else grep -E '^\s*(--- |PASS|ok )|axe-core:|^openapi:' "$jlog"; fi
  rm -f "$jlog"
  echo "test.sh: the journey suite took $((SECONDS - t0)) s"
  cat "$WR_OPENAPI_REPORT"
  [ "$jrc" -eq 0 ] || exit "$jrc"
fi
rm -f "$WR_OPENAPI_REPORT"
unset WR_OPENAPI_REPORT
# The same suites of the packages that talk to Redis (queue, stream, the end-to-end server
# tests) once more against a real Redis Cluster: WR_TEST_REDIS=cluster makes
# redistest.Start hand every test the test binary's one shared cluster (3 masters +
# 3 replicas on loopback, emptied per test) instead of a private redis-server, and checks
# every command the tests' clients send against the one-slot rule (queue/redistest). Tests
# that kill, pause or restart their Redis keep a private server (redistest.Single).
# The browser tests (TestBrowser*, TestJourney*) are left out of this pass: they drive the same server
# code through Chromium and would add minutes without touching Redis differently. So is
# TestAutoRateFindsTheKnee (~75 s): it measures a PostgreSQL backend's knee, and the
# controller's Redis side (health windows, the rate under WATCH) runs on the cluster in
# queue's TestAutoRate* and TestHealth*.
if [[ " $passes " == *" cluster "* ]]; then
  echo "test.sh: go test -race against a Redis Cluster (WR_TEST_REDIS=cluster)"
  t0=$SECONDS
  WR_TEST_REDIS=cluster go test -race -count=1 -timeout 15m -skip '^TestBrowser|^TestJourney|^TestAutoRateFindsTheKnee$' ./queue/... ./stream/... ./server/...
  echo "test.sh: the cluster pass took $((SECONDS - t0)) s"
fi
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
echo "test.sh: all green in $SECONDS s"
