package orders

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SetCommitHooks installs test hooks around COMMIT in PlaceOrder; set before use.
func SetCommitHooks(s *Store, before func(context.Context, pgx.Tx) error, after func() error) {
	s.beforeCommit, s.afterCommit = before, after
}

// Migrate runs the migrations through a pool of its own and returns how many this call
// applied.
func Migrate(ctx context.Context, dsn string) (int, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	return migrate(ctx, pool)
}

// Classify exposes the error mapping for table tests.
var Classify = classify
var IsKnown = isSentinel

// JudgeStock judges a queue's stock in tx, as the transactions that change stock do.
var JudgeStock = judgeStock
