# make run   — one instance, zero configuration (in-process Redis, local PostgreSQL)
# make test  — installs what is missing, then gofmt, go vet, go test -race, short fuzz
# make bench — the benchmark suite at a size that fits in a few minutes (see BENCHMARKS.md)
.PHONY: run test bench
run:
	go run ./server
test:
	./scripts/test.sh
bench:
	./k6/bench.sh
