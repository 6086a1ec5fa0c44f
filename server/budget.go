package main

import (
	"runtime"
	"syscall"

	"github.com/rs/zerolog"
)

// Connection budgets. The Go runtime raises the soft open-file limit to the hard one at
// start (Go 1.19+), so the limit read here is already the hard one; what is left after the
// pools and files is for clients, and streams get all of it but some room for joins, health
// checks and the admin view. The pool estimate is for one Redis server; on a Redis Cluster
// or behind Sentinel each node has its own pool: set WR_MAX_CONNS.
const (
	fileReserve   = 128 // log, binaries, DNS, the local PostgreSQL's pipes, slack
	joinRoomMax   = 512 // connections kept free of streams, at most …
	joinRoomShare = 4   // … and at most a quarter of the budget
	minBudget     = 16
)

// budgets returns the connection and stream budgets: the configured ones, or derived from
// the open-file limit.
func budgets(cfg config, log zerolog.Logger) (maxConns, maxStreams int64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn().Err(err).Msg("open-file limit unknown: no connection budget unless WR_MAX_CONNS is set")
	}
	// The main Redis pool (go-redis: 10 per CPU), the admission pool, one pub/sub
	// connection, and the PostgreSQL pool.
	pools := int64(10*runtime.GOMAXPROCS(0) + admitPoolSize + 1 + cfg.PGMaxConns)
	maxConns = int64(cfg.MaxConns)
	if maxConns == 0 && lim.Cur > 0 && lim.Cur < 1<<40 { // RLIM_INFINITY: no budget from it
		maxConns = max(minBudget, int64(lim.Cur)-fileReserve-pools)
	}
	maxStreams = int64(cfg.MaxStreams)
	if maxStreams == 0 && maxConns > 0 {
		maxStreams = max(1, maxConns-min(joinRoomMax, maxConns/joinRoomShare))
	}
	switch {
	case maxConns > 0 && maxStreams >= maxConns:
		log.Warn().Int64("max_conns", maxConns).Int64("max_streams", maxStreams).
			Msg("WR_MAX_STREAMS is not below WR_MAX_CONNS: no room is left for joins and health checks when streams are full")
	case cfg.MaxConns > 0 && lim.Cur > 0 && uint64(cfg.MaxConns)+uint64(pools)+fileReserve > lim.Cur:
		log.Warn().Int64("max_conns", maxConns).Uint64("nofile", lim.Cur).
			Msg("WR_MAX_CONNS plus the pools is above the open-file limit: accepts may fail with too many open files (they are retried)")
	}
	log.Info().Uint64("nofile_soft", lim.Cur).Uint64("nofile_hard", lim.Max).Int64("max_conns", maxConns).
		Int64("max_streams", maxStreams).Msg("connection budgets")
	return maxConns, maxStreams
}
