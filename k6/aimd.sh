#!/usr/bin/env bash
# k6/aimd.sh — the auto rate controller (rate_mode "auto") in a longer run than the test
# command's, with numbers and a chart. See BENCHMARKS.md, "Adaptive admission".
#
# Runs server/TestAutoRateFindsTheKnee without the race detector: a private redis-server
# and PostgreSQL (started and stopped by the test itself, loopback only), an order backend
# of known capacity (6 pooled connections, a 300 ms INSERT: 20 orders/s), the knee measured
# by an open-loop rate step, then the auto mode for AIMD_AUTO_SECONDS (default 90) and, after
# the backend's service time doubles, AIMD_AFTER_SECONDS more (default 45). Writes the
# rate-vs-time and p95-vs-time series to k6/results/aimd/aimd.csv (+ .meta) and draws
# screenshots/aimd-rate.png (an SVG rendered by headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
out=k6/results/aimd
mkdir -p "$out"
WR_AIMD_CSV="$PWD/$out/aimd.csv" WR_AIMD_AUTO_SECONDS="${AIMD_AUTO_SECONDS:-90}" WR_AIMD_AFTER_SECONDS="${AIMD_AFTER_SECONDS:-45}" \
	go test -count=1 -timeout 20m -v -run '^TestAutoRateFindsTheKnee$' ./server | tee "$out/test.txt" | grep -E 'knee|settled|doubled|^(--- |ok|FAIL)'
go run ./k6/aimdchart -csv "$out/aimd.csv" -meta "$out/aimd.csv.meta" >"$out/aimd.svg"
chrome=${CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)}
"$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,520 \
	--screenshot="$PWD/screenshots/aimd-rate.png" "file://$PWD/$out/aimd.svg" 2>/dev/null
echo "chart: screenshots/aimd-rate.png; series: $out/aimd.csv"
cat "$out/aimd.csv.meta"
