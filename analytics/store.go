// Package analytics keeps a queue's history in PostgreSQL and answers the operators'
// history, report and audit questions from it.
//
// History: the instance that leads a queue records it (Recorder, a queue.TickObserver) in
// 10-second steps aligned to wall-clock multiples of 10 s: the step's peak waiting (every
// lane), pre-queue and open streams, what happened in it (joined, admitted, abandoned, left,
// expired: deltas of the queue's cumulative counters), the wait-time histogram of the users
// it admitted, and the admission rate in force. A queue that rests has no leader and
// records nothing.
//
// Retention and rollups: one table, queue_history, keyed (queue, step_seconds, t). 10-s rows
// are kept 48 h; each finished minute is rolled up into a 60-s row (sums of the counts, the
// peaks' maximum, the histograms added) which is kept 90 days. The recorder rolls up the
// last finished minutes at every minute boundary (idempotent upserts, one instance at a
// time by an advisory lock) and deletes expired rows in batches of 1,000 at most every 5
// minutes. History and reports read 10-s rows for steps under a minute and minute rows
// (plus 10-s rows of minutes not yet rolled up) otherwise.
//
// Orders are not recorded: they are counted at query time from the orders table, through
// the products whose queue is the queue now — a product moved to another queue later takes
// its past orders with it.
package analytics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/topology"
)

// ErrUnavailable: PostgreSQL did not answer (down, or no connection free in time).
var ErrUnavailable = errors.New("analytics: database unavailable")

// Source is what the recorder and the report read of the queues (*queue.Queue).
type Source interface {
	Stats(ctx context.Context, name string) (queue.QueueStats, error)
	Draw(ctx context.Context, name string) (queue.DrawInfo, error)
}

// Instances lists the live instances (*topology.Topology): the recorder sums their open
// streams per queue.
type Instances interface {
	Instances(ctx context.Context) ([]topology.Instance, error)
}

// Config tunes the history. Zero fields take the documented defaults.
type Config struct {
	// Step is the recording step (10 s). Only tests change it; history answers are built
	// for 10-s rows.
	Step time.Duration
	// QueryTimeout bounds one history, report or write statement (5 s).
	QueryTimeout time.Duration
	Log          zerolog.Logger
}

// Store reads and writes the history of the queues in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	src  Source
	ins  Instances
	cfg  Config
	now  func() time.Time
}

// New returns a Store on pool (migrated by Migrate) reading queues from src and the live
// instances from ins.
func New(pool *pgxpool.Pool, src Source, ins Instances, cfg Config) *Store {
	if cfg.Step <= 0 {
		cfg.Step = 10 * time.Second
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 5 * time.Second
	}
	return &Store{pool: pool, src: src, ins: ins, cfg: cfg, now: time.Now}
}

// OpenPool opens a small pgx pool of its own for the history (and audit) on url, so that
// a long report never takes a connection the order route needs.
func OpenPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("analytics: database url: %w", err)
	}
	if maxConns <= 0 {
		maxConns = 4
	}
	pcfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("analytics: open pool: %w", classify(err))
	}
	return pool, nil
}

// Pool is the pgx pool the Store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// classify wraps connection-level failures in ErrUnavailable; SQL errors stay as they are.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code[:2] != "08" && pe.Code[:2] != "57" && pe.Code != "53300" {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
