# make run   — one instance, zero configuration (in-process Redis, local PostgreSQL)
# make test  — installs what is missing, then gofmt, go vet, go test -race on a private Redis
#              per test (the page tests in Chromium included), the journey suite,
#              queue/stream/server on Redis Clusters (WR_TEST_REDIS=cluster, see
#              queue/redistest), short fuzz runs
# make test-cluster — the cluster pass alone (with gofmt and go vet, without fuzzing)
# make screenshots — the single pass with the journeys (no cluster, no fuzzing), saving the
#              browser tests' screenshots in screenshots/ (make test saves none: WR_SCREENSHOTS=off)
# make bench — the benchmark suite at a size that fits in a few minutes (see BENCHMARKS.md)
.PHONY: run test test-cluster screenshots bench
run:
	go run ./server
test:
	./scripts/test.sh
test-cluster:
	WR_TEST_PASSES=cluster WR_FUZZ_EXECS=0 ./scripts/test.sh
screenshots:
	WR_SCREENSHOTS=$(CURDIR)/screenshots WR_TEST_PASSES=single WR_FUZZ_EXECS=0 ./scripts/test.sh
bench:
	./k6/bench.sh
